-- The Lua module `plan` as a rock: `luarocks make` in this folder builds it
-- against an installed libplan that pkg-config finds (libplan-verify.pc;
-- set PKG_CONFIG_PATH for a prefix of your own) and installs plan.so into
-- the rocks tree, where a stock lua5.4 finds it (docs/lua.md, Installing).
rockspec_format = "3.0"
package = "libplan"
version = "scm-1"
source = {
  url = "git+file:///dev/null", -- `luarocks make` builds from this folder
}
description = {
  summary = "Distributed-training parallelization plans: read, validate, hash, search, verify",
  detailed = [[
The Lua frontend of libplan: plans as values, search strategies written in
Lua, verification on simulated ranks. Needs the C library installed.]],
  license = "see the repository",
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
build = {
  type = "make",
  build_target = "rock",
  install_target = "rock-install",
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    LUA_INCDIR = "$(LUA_INCDIR)",
  },
  install_variables = {
    INST_LIBDIR = "$(LIBDIR)",
  },
}
