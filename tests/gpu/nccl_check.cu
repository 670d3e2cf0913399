/* nccl_check: runs every collective of the CUDA runner (collectives.h) and
 * checks each result against values computed on the host.
 *
 * usage: nccl_check --virtual [N]      N virtual ranks on one GPU (4)
 *        nccl_check --local [N]        NCCL, one process, N GPUs (0: all)
 *        nccl_check --id-file PATH [--timeout S]
 *                                      NCCL, one process per rank (RANK,
 *                                      WORLD_SIZE, LOCAL_RANK from the
 *                                      launcher; rank 0 writes the id)
 *        [--count N]                   elements per rank and chunk
 *
 * Inputs are small integers, f(r, j) = 3 (r + 1) + j mod 13, so sums,
 * maxima and minima are exact in f32 and f64 in any order and compare
 * with ==; avg allows NCCL's rounding (n + 1 ulp). The virtual mode also
 * checks that its all-reduce of random doubles has the bits of the host
 * loop the verifier runs (verifier/verify.c), for every reduction.
 *
 * Prints the mode and the NCCL settings, one line per check ("pass ..." or
 * "FAIL ..."), and exits 0 when every check passed, 1 when one failed,
 * 3 when it cannot run here (no GPU, NCCL cannot start), 2 on bad usage. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "collectives.h"
#include "libplan/common.h"

namespace {

enum { SUM = 0, AVG = 1, MAX = 2, MIN = 3 };
const char *const red_name[4] = {"sum", "avg", "max", "min"};

int failures = 0, passes = 0;

struct world {
  bool virt;
  int nlocal, size;
  int rank[PLAN_CUDA_MAX_GROUP], dev[PLAN_CUDA_MAX_GROUP];
  plan_cuda_comms *comms;
};

double f(int r, int64_t j) { return 3.0 * (r + 1) + (double)(j % 13); }

void report(bool ok, const char *what, const char *detail) {
  if (ok)
    passes++;
  else
    failures++;
  printf("%s %s%s%s\n", ok ? "pass" : "FAIL", what, detail[0] ? ": " : "",
         detail);
  fflush(stdout);
}

bool cuda_ok(cudaError_t e, const char *what) {
  if (e == cudaSuccess)
    return true;
  char d[256];
  snprintf(d, sizeof d, "%s", cudaGetErrorString(e));
  report(false, what, d);
  return false;
}

/* Device buffers of every local rank. */
template <typename T> struct bufs {
  const world *w;
  std::vector<T *> p;
  int64_t n;
  bufs(const world *w_, int64_t n_) : w(w_), p(w_->nlocal, nullptr), n(n_) {
    for (int i = 0; i < w->nlocal; i++) {
      cudaSetDevice(w->dev[i]);
      if (cudaMalloc(&p[i], sizeof(T) * (size_t)(n ? n : 1)) != cudaSuccess)
        p[i] = nullptr;
    }
  }
  ~bufs() {
    for (int i = 0; i < w->nlocal; i++) {
      cudaSetDevice(w->dev[i]);
      cudaFree(p[i]);
    }
  }
  bool ok() const {
    for (T *x : p)
      if (!x)
        return false;
    return true;
  }
  /* local rank i's buffer, element j = g(global rank, j) */
  template <typename G> bool fill(G g) {
    std::vector<T> h((size_t)n);
    for (int i = 0; i < w->nlocal; i++) {
      for (int64_t j = 0; j < n; j++)
        h[(size_t)j] = (T)g(w->rank[i], j);
      cudaSetDevice(w->dev[i]);
      if (!cuda_ok(cudaMemcpy(p[i], h.data(), sizeof(T) * (size_t)n,
                              cudaMemcpyHostToDevice),
                   "upload"))
        return false;
    }
    return true;
  }
  /* compares every local rank's buffer with want(global rank, j) */
  template <typename G>
  void expect(const char *what, G want, double ulps) {
    std::vector<T> h((size_t)n);
    int64_t bad = 0, at = -1;
    double got = 0, exp = 0;
    for (int i = 0; i < w->nlocal; i++) {
      cudaSetDevice(w->dev[i]);
      if (!cuda_ok(cudaMemcpy(h.data(), p[i], sizeof(T) * (size_t)n,
                              cudaMemcpyDeviceToHost),
                   what))
        return;
      for (int64_t j = 0; j < n; j++) {
        double e = (double)(T)want(w->rank[i], j), g = (double)h[(size_t)j];
        double tol = ulps * fabs(e) *
                     (sizeof(T) == 4 ? 1.1920929e-7 : 2.220446049250313e-16);
        if (!(fabs(g - e) <= tol)) {
          if (!bad++) {
            at = j;
            got = g;
            exp = e;
          }
        }
      }
    }
    char d[256] = "";
    if (bad)
      snprintf(d, sizeof d, "%lld elements differ, first at %lld: %.17g, "
                            "want %.17g",
               (long long)bad, (long long)at, got, exp);
    report(!bad, what, d);
  }
};

template <typename T> plan_dtype dtype_of();
template <> plan_dtype dtype_of<float>() { return PLAN_F32; }
template <> plan_dtype dtype_of<double>() { return PLAN_F64; }

bool step(int rc, const char *what, const char *err) {
  if (!rc)
    return true;
  report(false, what, err);
  return false;
}

template <typename T> void check_all(const world *w, int64_t count) {
  const char *tn = sizeof(T) == 4 ? "f32" : "f64";
  plan_dtype dt = dtype_of<T>();
  int n = w->size;
  char what[128], err[512];
  auto vin = [](const bufs<T> &b) {
    return std::vector<const void *>(b.p.begin(), b.p.end());
  };
  auto vout = [](bufs<T> &b) {
    return std::vector<void *>(b.p.begin(), b.p.end());
  };
  for (int red = 0; red < 4; red++) {
    bufs<T> s(w, count), r(w, count);
    if (!s.ok() || !r.ok() || !s.fill(f))
      return report(false, "allocation", "");
    snprintf(what, sizeof what, "all_reduce %s %s", red_name[red], tn);
    int rc;
    if (w->virt) {
      for (int i = 0; i < w->nlocal; i++)
        cudaMemcpy(r.p[i], s.p[i], sizeof(T) * (size_t)count,
                   cudaMemcpyDeviceToDevice);
      auto o = vout(r);
      rc = plan_cuda_virtual_all_reduce(o.data(), n, count, dt, red, NULL,
                                        err, sizeof err);
      if (!rc)
        rc = cudaDeviceSynchronize() != cudaSuccess;
    } else {
      auto i = vin(s);
      auto o = vout(r);
      rc = plan_cuda_nccl_all_reduce(w->comms, i.data(), o.data(), count, dt,
                                     red, err, sizeof err);
    }
    if (!step(rc, what, err))
      continue;
    r.expect(
        what,
        [&](int, int64_t j) {
          double sum = 0;
          for (int m = 0; m < n; m++)
            sum += f(m, j);
          return red == SUM   ? sum
                 : red == AVG ? sum / n
                 : red == MAX ? f(n - 1, j)
                              : f(0, j);
        },
        red == AVG ? n + 1 : 0); /* NCCL may scale each input by 1/n */
  }
  { /* all_gather */
    bufs<T> s(w, count), r(w, count * n);
    if (!s.ok() || !r.ok() || !s.fill(f))
      return report(false, "allocation", "");
    snprintf(what, sizeof what, "all_gather %s", tn);
    auto i = vin(s);
    auto o = vout(r);
    int rc = w->virt ? plan_cuda_virtual_all_gather(i.data(), o.data(), n,
                                                    count, dt, NULL, err,
                                                    sizeof err)
                     : plan_cuda_nccl_all_gather(w->comms, i.data(),
                                                 o.data(), count, dt, err,
                                                 sizeof err);
    if (w->virt && !rc)
      rc = cudaDeviceSynchronize() != cudaSuccess;
    if (step(rc, what, err))
      r.expect(what, [&](int, int64_t j) {
        return f((int)(j / count), j % count);
      }, 0);
  }
  for (int red = 0; red < 4; red += 2) { /* reduce_scatter: sum, max */
    bufs<T> s(w, count * n), r(w, count);
    if (!s.ok() || !r.ok() || !s.fill(f))
      return report(false, "allocation", "");
    snprintf(what, sizeof what, "reduce_scatter %s %s", red_name[red], tn);
    auto i = vin(s);
    auto o = vout(r);
    int rc = w->virt ? plan_cuda_virtual_reduce_scatter(
                           i.data(), o.data(), n, count, dt, red, NULL, err,
                           sizeof err)
                     : plan_cuda_nccl_reduce_scatter(w->comms, i.data(),
                                                     o.data(), count, dt, red,
                                                     err, sizeof err);
    if (w->virt && !rc)
      rc = cudaDeviceSynchronize() != cudaSuccess;
    if (step(rc, what, err))
      r.expect(what, [&](int rank, int64_t j) {
        int64_t g = (int64_t)rank * count + j;
        double sum = 0;
        for (int m = 0; m < n; m++)
          sum += f(m, g);
        return red == SUM ? sum : f(n - 1, g);
      }, 0);
  }
  { /* all_to_all */
    bufs<T> s(w, count * n), r(w, count * n);
    if (!s.ok() || !r.ok() || !s.fill(f))
      return report(false, "allocation", "");
    snprintf(what, sizeof what, "all_to_all %s", tn);
    auto i = vin(s);
    auto o = vout(r);
    int rc = w->virt ? plan_cuda_virtual_all_to_all(i.data(), o.data(), n,
                                                    count, dt, NULL, err,
                                                    sizeof err)
                     : plan_cuda_nccl_all_to_all(w->comms, i.data(),
                                                 o.data(), count, dt, err,
                                                 sizeof err);
    if (w->virt && !rc)
      rc = cudaDeviceSynchronize() != cudaSuccess;
    if (step(rc, what, err))
      r.expect(what, [&](int rank, int64_t j) {
        int p = (int)(j / count);
        return f(p, (int64_t)rank * count + j % count);
      }, 0);
  }
  { /* send/recv: a ring shift by one */
    bufs<T> s(w, count), r(w, count);
    if (!s.ok() || !r.ok() || !s.fill(f))
      return report(false, "allocation", "");
    snprintf(what, sizeof what, "send/recv %s", tn);
    int rc = 0;
    if (w->virt) {
      for (int k = 0; !rc && k < n; k++)
        rc = plan_cuda_virtual_send_recv(s.p[k], r.p[(k + 1) % n], count, dt,
                                         NULL, err, sizeof err);
      if (!rc)
        rc = cudaDeviceSynchronize() != cudaSuccess;
    } else {
      auto i = vin(s);
      auto o = vout(r);
      rc = plan_cuda_nccl_shift(w->comms, i.data(), o.data(), count, dt, 1,
                                err, sizeof err);
    }
    if (step(rc, what, err))
      r.expect(what, [&](int rank, int64_t j) {
        return f((rank - 1 + n) % n, j);
      }, 0);
  }
}

/* The verifier's all-reduce on the device: the bits of the host loop. */
void check_host_bits(int n, int64_t count) {
  std::vector<std::vector<double>> blk((size_t)n,
                                       std::vector<double>((size_t)count));
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto &b : blk)
    for (double &v : b) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      v = ((double)(x >> 11) / 9007199254740992.0 - 0.5) * 1e3;
    }
  for (int red = 0; red < 4; red++) {
    std::vector<double> want((size_t)count), got = blk[0];
    for (int64_t e = 0; e < count; e++) {
      double acc = blk[0][(size_t)e];
      for (int m = 1; m < n; m++) {
        double b = blk[(size_t)m][(size_t)e];
        acc = red == MAX ? (acc > b ? acc : b)
              : red == MIN ? (acc < b ? acc : b)
                           : acc + b;
      }
      want[(size_t)e] = red == AVG ? acc / n : acc;
    }
    std::vector<double *> ptr((size_t)n);
    ptr[0] = got.data();
    for (int m = 1; m < n; m++)
      ptr[(size_t)m] = blk[(size_t)m].data();
    char err[512] = "", what[128];
    snprintf(what, sizeof what,
             "the verifier's all_reduce %s, %d members, bit-identical to "
             "the host loop",
             red_name[red], n);
    if (!step(plan_cuda_host_all_reduce(ptr.data(), n, count, red, err,
                                        sizeof err),
              what, err))
      continue;
    bool same = !memcmp(got.data(), want.data(), sizeof(double) * count);
    report(same, what, same ? "" : "the bits differ");
  }
}

int usage(void) {
  fprintf(stderr, "usage: nccl_check --virtual [N] | --local [N] | "
                  "--id-file PATH [--timeout S]  [--count N]\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  world w;
  memset(&w, 0, sizeof w);
  const char *id_file = NULL;
  int mode = -1, nranks = -1;
  double timeout = 60;
  int64_t count = (1 << 16) + 3;
  for (int i = 1; i < argc; i++) {
    bool more = i + 1 < argc && argv[i + 1][0] != '-';
    if (!strcmp(argv[i], "--virtual") || !strcmp(argv[i], "--local")) {
      mode = argv[i][2] == 'v' ? 0 : 1;
      if (more)
        nranks = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--id-file") && more) {
      mode = 2;
      id_file = argv[++i];
    } else if (!strcmp(argv[i], "--timeout") && more) {
      timeout = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--count") && more) {
      count = atoll(argv[++i]);
    } else {
      return usage();
    }
  }
  if (mode < 0 || count < 1)
    return usage();
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  /* one process per rank reads its environment and meets the others
   * first: its own device is checked after that */
  if (mode != 2 && (e != cudaSuccess || !ndev)) {
    printf("nccl_check: cannot run here: cudaGetDeviceCount: %s\n",
           e != cudaSuccess ? cudaGetErrorString(e)
                            : "no CUDA-capable device is detected");
    return 3;
  }
  char err[512] = "";
  if (mode == 0) {
    w.virt = true;
    w.size = w.nlocal = nranks > 0 ? nranks : 4;
    if (w.size > PLAN_CUDA_MAX_GROUP)
      return usage();
    for (int i = 0; i < w.size; i++)
      w.rank[i] = i;
    cudaSetDevice(0);
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    printf("nccl_check: virtual ranks: %d ranks on device 0 (%s), "
           "collectives as kernels in member order, %lld elements\n",
           w.size, p.name, (long long)count);
  } else {
    int rc = mode == 1
                 ? plan_cuda_comms_init_local(&w.comms, nranks, err, sizeof err)
                 : plan_cuda_comms_init_env(&w.comms, id_file, timeout, err,
                                            sizeof err);
    if (rc) {
      /* no device is "cannot run here"; any other failure (NCCL's init,
       * the id file) is this check failing */
      int ndev = 0;
      bool none = cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0;
      printf("nccl_check: %s: %s\n", none ? "cannot run here" : "FAILED",
             err);
      return none ? 3 : 1;
    }
    w.nlocal = plan_cuda_comms_local(w.comms);
    w.size = plan_cuda_comms_world(w.comms);
    for (int i = 0; i < w.nlocal; i++) {
      w.rank[i] = plan_cuda_comms_rank(w.comms, i);
      w.dev[i] = plan_cuda_comms_device(w.comms, i);
    }
    printf("nccl_check: %s; %lld elements\n",
           plan_cuda_comms_describe(w.comms), (long long)count);
  }
  fflush(stdout);
  check_all<float>(&w, count);
  check_all<double>(&w, count);
  if (w.virt)
    for (int n = 2; n <= 8; n *= 2)
      check_host_bits(n, count);
  plan_cuda_comms_free(w.comms);
  printf("nccl_check: %d passed, %d failed\n", passes, failures);
  return failures ? 1 : 0;
}
