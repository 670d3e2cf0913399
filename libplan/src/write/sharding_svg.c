/* A picture of how a plan lays one tensor out over its mesh, as SVG: one
 * cell per rank, the mesh's even-numbered axes (0, 2, ...) down and its
 * odd-numbered ones across, each cell the tensor's outline with the block
 * that rank holds filled in. Ranks that hold the same block (replicas) share
 * a colour; a block that is a partial value (an addend of a reduction over
 * some axis) is hatched. The block of every rank comes from the same layout
 * the lowering and the verifier use (plan_redist_local_layout_r). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/suggest.h"
#include "ir/ir.h"
#include "ir/placement.h"
#include "libplan/plan.h"
#include "lower/redist.h"

enum { MAX_CELLS = 1024, CELL_W = 132, CELL_H = 96, GAP = 8 };
enum { LEFT = 96, TOP = 112, BOX_W = 112, BOX_H = 56 };

static const unsigned palette[10] = {0x4e79a7, 0xf28e2b, 0xe15759, 0x76b7b2,
                                     0x59a14f, 0xedc948, 0xb07aa1, 0xff9da7,
                                     0x9c755f, 0xbab0ac};

/* The placement tensor t has in p: its producer's output placement (an
 * activation or output), else how the plan stores it (all R when unsaid). */
static plan_placement placement_of(const plan_plan *p, int t) {
  const plan_tensor *x = &p->program->tensors[t];
  plan_placement pl;
  plan_placement_replicated(&pl, p->mesh.naxes);
  if (x->producer >= 0 && p->strategies[x->producer].set)
    pl = p->strategies[x->producer].out[x->producer_slot];
  else if (x->producer < 0 && p->placements[t].set)
    pl = p->placements[t].pl;
  return pl;
}

/* The two dims drawn (down, across): the sharded ones first, then the
 * last dims; -1 where the tensor has fewer. */
static void drawn_dims(const plan_placement *pl, int rank, int out[2]) {
  out[0] = out[1] = -1;
  int n = 0;
  for (int d = 0; d < rank && n < 2; d++)
    for (int a = 0; a < pl->naxes; a++)
      if (pl->ax[a].kind == PLAN_PL_S && pl->ax[a].dim == d) {
        out[n++] = d;
        break;
      }
  for (int d = rank - 1; d >= 0 && n < 2; d--)
    if (d != out[0])
      out[n++] = d;
  if (n == 2 && out[0] > out[1]) { /* keep the tensor's own dim order */
    int t = out[0];
    out[0] = out[1];
    out[1] = t;
  }
}

/* Rank r's row and column in the grid: the mixed-radix number of its
 * coordinates on the even (row) and odd (column) axes, first axis major. */
static void grid_pos(const plan_mesh *m, const int64_t *coord, int64_t *row,
                     int64_t *col) {
  *row = *col = 0;
  for (int a = 0; a < m->naxes; a++) {
    int64_t *v = a % 2 ? col : row;
    *v = *v * m->axis_sizes[a] + coord[a];
  }
}

static int64_t grid_count(const plan_mesh *m, int parity) {
  int64_t n = 1;
  for (int a = parity; a < m->naxes; a += 2)
    n *= m->axis_sizes[a];
  return n;
}

/* "dp=1 pp=0": the coordinates of grid line `v` on the axes of `parity`. */
static void axis_label(char *buf, size_t size, const plan_mesh *m, int parity,
                       int64_t v) {
  int64_t c[PLAN_MAX_MESH_AXES] = {0};
  for (int a = m->naxes - 1; a >= 0; a--)
    if (a % 2 == parity) {
      c[a] = v % m->axis_sizes[a];
      v /= m->axis_sizes[a];
    }
  size_t u = 0;
  buf[0] = 0;
  for (int a = parity; a < m->naxes && u < size; a += 2)
    u += (size_t)snprintf(buf + u, size - u, "%s%s=%lld", u ? " " : "",
                          m->axis_names[a], (long long)c[a]);
}

/* "[0:4, 8:16]" for the block at offset off of extent len. */
static void block_text(char *buf, size_t size, const int64_t *off,
                       const int64_t *len, int rank) {
  size_t u = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < rank && u < size; d++)
    u += (size_t)snprintf(buf + u, size - u, "%s%lld:%lld", d ? ", " : "",
                          (long long)off[d], (long long)(off[d] + len[d]));
  if (u < size)
    snprintf(buf + u, size - u, "]");
}

typedef struct cell {
  int64_t off[PLAN_MAX_RANK], len[PLAN_MAX_RANK];
  int colour; /* index of the first rank with the same block */
} cell;

static void put_cell(plan_buf *b, const plan_plan *p, const plan_tensor *t,
                     const cell *c, const int dims[2], int64_t rank_id,
                     double x, double y, bool partial) {
  const plan_mesh *m = &p->mesh;
  double ext[2] = {1, 1}, o[2] = {0, 0}, l[2] = {1, 1};
  for (int k = 0; k < 2; k++)
    if (dims[k] >= 0 && t->dims[dims[k]] > 0) {
      ext[k] = (double)t->dims[dims[k]];
      o[k] = (double)c->off[dims[k]] / ext[k];
      l[k] = (double)c->len[dims[k]] / ext[k];
    }
  /* a 1-D tensor is a bar across (its one dim drawn across); 0-D a small
   * square */
  double bw = dims[0] >= 0 ? BOX_W : 16, bh = dims[1] >= 0 ? BOX_H : 16;
  if (dims[1] < 0 && dims[0] >= 0) {
    o[1] = o[0], l[1] = l[0];
    o[0] = 0, l[0] = 1;
  }
  double bx = x + (CELL_W - bw) / 2, by = y + 4;
  char txt[256];
  block_text(txt, sizeof txt, c->off, c->len, t->rank);
  plan_buf_printf(b, "<g><title>rank %lld holds ", (long long)rank_id);
  plan_buf_put_xml(b, txt);
  plan_buf_printf(b,
                  "%s</title>\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                  "height=\"%.1f\" fill=\"#f4f4f4\" stroke=\"#888888\"/>\n",
                  partial ? " (a partial value)" : "", bx, by, bw, bh);
  /* data- attributes: what the picture shows, for a reader (the tests) */
  plan_buf_printf(b, "<rect class=\"block\" data-rank=\"%lld\" data-block=\"",
                  (long long)rank_id);
  plan_buf_put_xml(b, txt);
  plan_buf_printf(b,
                  "\" data-colour=\"%d\" x=\"%.1f\" y=\"%.1f\" "
                  "width=\"%.1f\" height=\"%.1f\" fill=\"#%06x\"/>\n",
                  c->colour, bx + o[1] * bw, by + o[0] * bh, l[1] * bw,
                  l[0] * bh, palette[c->colour % 10]);
  if (partial)
    plan_buf_printf(b,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"%.1f\" fill=\"url(#partial)\"/>\n",
                    bx + o[1] * bw, by + o[0] * bh, l[1] * bw, l[0] * bh);
  int64_t dev = m->devices ? m->devices[rank_id] : rank_id;
  plan_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"r\">rank %lld",
                  x + CELL_W / 2.0, (int)y + BOX_H + 20, (long long)rank_id);
  if (dev != rank_id)
    plan_buf_printf(b, " (device %lld)", (long long)dev);
  plan_buf_printf(b, "</text>\n<text x=\"%.1f\" y=\"%d\" class=\"b\">",
                  x + CELL_W / 2.0, (int)y + BOX_H + 34);
  plan_buf_put_xml(b, txt);
  plan_buf_puts(b, "</text></g>\n");
}

int plan_sharding_svg(char **text, size_t *len, const plan_plan *p,
                      const char *tensor) {
  if (!text || !p || !tensor)
    return plan_failf(PLAN_EUSAGE, "plan_sharding_svg: NULL argument");
  if (!p->has_mesh)
    return plan_failf(PLAN_EUSAGE,
                      "plan_sharding_svg: the plan has no mesh to draw");
  int t = plan_strmap_get(&p->program->tensor_by_name, tensor);
  if (t < 0) {
    char hint[PLAN_HINT_SIZE];
    plan_hint_field(hint, sizeof hint, tensor, p->program->tensors,
                    (size_t)p->program->ntensors, sizeof(plan_tensor),
                    offsetof(plan_tensor, name));
    return plan_failf(PLAN_ENOTFOUND, "no tensor '%s' in the program%s", tensor,
                      hint);
  }
  const plan_mesh *m = &p->mesh;
  if (m->ndevices > MAX_CELLS)
    return plan_failf(PLAN_ELIMIT,
                      "the mesh has %lld ranks; a sharding picture draws at "
                      "most %d",
                      (long long)m->ndevices, MAX_CELLS);
  const plan_tensor *x = &p->program->tensors[t];
  plan_placement pl = placement_of(p, t);
  cell *cells = calloc((size_t)m->ndevices, sizeof *cells);
  if (!cells)
    return plan_oom();
  /* every rank's block, and the first rank holding the same one */
  int64_t coord[PLAN_MAX_MESH_AXES] = {0};
  int ncolours = 0;
  for (int64_t r = 0; r < m->ndevices; r++) {
    int64_t v = r;
    for (int a = m->naxes - 1; a >= 0; a--) {
      coord[a] = v % m->axis_sizes[a];
      v /= m->axis_sizes[a];
    }
    plan_redist_local_layout_r(&pl, x->dims, x->rank, m->axis_sizes, m->ratios,
                               m->nratios, coord, cells[r].len, cells[r].off);
    cells[r].colour = -1;
    for (int64_t q = 0; q < r && cells[r].colour < 0; q++)
      if (!memcmp(cells[q].off, cells[r].off, sizeof cells[r].off) &&
          !memcmp(cells[q].len, cells[r].len, sizeof cells[r].len))
        cells[r].colour = cells[q].colour;
    if (cells[r].colour < 0)
      cells[r].colour = ncolours++;
  }
  bool partial = false;
  char over[128] = "";
  for (int a = 0, u = 0; a < pl.naxes; a++)
    if (pl.ax[a].kind == PLAN_PL_P) {
      partial = true;
      u += snprintf(over + u, sizeof over - (size_t)u, "%s'%s'", u ? ", " : "",
                    m->axis_names[a]);
      if (u >= (int)sizeof over)
        break;
    }
  int dims[2];
  drawn_dims(&pl, x->rank, dims);
  int64_t rows = grid_count(m, 0), cols = grid_count(m, 1);
  double w = LEFT + (double)cols * (CELL_W + GAP) + 16,
         h = TOP + (double)rows * (CELL_H + GAP) + 16;
  if (w < 560)
    w = 560;
  plan_buf b;
  plan_buf_init(&b);
  plan_buf_printf(&b,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                  "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
                  "font-family=\"sans-serif\" font-size=\"11\">\n",
                  w, h, w, h);
  plan_buf_puts(&b,
                "<style>.r{text-anchor:middle;fill:#222222}"
                ".b{text-anchor:middle;fill:#555555;font-size:10px}"
                ".h{fill:#222222;font-size:11px}</style>\n"
                "<defs><pattern id=\"partial\" width=\"6\" height=\"6\" "
                "patternUnits=\"userSpaceOnUse\" "
                "patternTransform=\"rotate(45)\"><rect width=\"2\" "
                "height=\"6\" fill=\"#ffffff\" fill-opacity=\"0.6\"/>"
                "</pattern></defs>\n"
                "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
  char pls[256], shape[160];
  plan_placement_format_r(&pl, m->ratios, m->nratios, pls, sizeof pls);
  {
    size_t u = (size_t)snprintf(shape, sizeof shape, "[");
    for (int d = 0; d < x->rank && u < sizeof shape; d++)
      u += (size_t)snprintf(shape + u, sizeof shape - u, "%s%lld",
                            d ? ", " : "", (long long)x->dims[d]);
    if (u < sizeof shape)
      snprintf(shape + u, sizeof shape - u, "]");
  }
  plan_buf_puts(&b, "<text x=\"16\" y=\"24\" font-size=\"15\">");
  plan_buf_put_xml(&b, x->name);
  plan_buf_printf(&b, " %s %s placed ", shape, plan_dtype_name(x->dtype));
  plan_buf_put_xml(&b, pls);
  plan_buf_puts(&b, " on [");
  for (int a = 0; a < m->naxes; a++) {
    plan_buf_puts(&b, a ? ", " : "");
    plan_buf_put_xml(&b, m->axis_names[a]);
    plan_buf_printf(&b, "=%lld", (long long)m->axis_sizes[a]);
  }
  plan_buf_puts(&b, "]</text>\n<text x=\"16\" y=\"44\" class=\"h\">");
  if (dims[0] >= 0 && dims[1] >= 0)
    plan_buf_printf(&b, "drawn: dim %d down, dim %d across; ", dims[0],
                    dims[1]);
  else if (dims[0] >= 0)
    plan_buf_printf(&b, "drawn: dim %d across; ", dims[0]);
  plan_buf_printf(&b,
                  "%d distinct block%s, one colour each (one colour on "
                  "several ranks: replicas, or addends where hatched)",
                  ncolours, ncolours == 1 ? "" : "s");
  plan_buf_puts(&b, "</text>\n");
  if (partial) {
    plan_buf_puts(&b, "<text x=\"16\" y=\"62\" class=\"h\">hatched: a partial "
                      "value, summed over ");
    plan_buf_put_xml(&b, over);
    plan_buf_puts(&b, " to give the block</text>\n");
  }
  char lab[256];
  for (int64_t c = 0; c < cols; c++) {
    axis_label(lab, sizeof lab, m, 1, c);
    plan_buf_printf(&b, "<text x=\"%.1f\" y=\"%d\" class=\"r\">",
                    LEFT + (double)c * (CELL_W + GAP) + CELL_W / 2.0, TOP - 12);
    plan_buf_put_xml(&b, lab);
    plan_buf_puts(&b, "</text>\n");
  }
  for (int64_t r = 0; r < rows; r++) {
    axis_label(lab, sizeof lab, m, 0, r);
    plan_buf_printf(&b, "<text x=\"8\" y=\"%.1f\" class=\"h\">",
                    TOP + (double)r * (CELL_H + GAP) + 34);
    plan_buf_put_xml(&b, lab);
    plan_buf_puts(&b, "</text>\n");
  }
  for (int64_t r = 0; r < m->ndevices; r++) {
    int64_t v = r, row, col;
    for (int a = m->naxes - 1; a >= 0; a--) {
      coord[a] = v % m->axis_sizes[a];
      v /= m->axis_sizes[a];
    }
    grid_pos(m, coord, &row, &col);
    put_cell(&b, p, x, &cells[r], dims, r, LEFT + (double)col * (CELL_W + GAP),
             TOP + (double)row * (CELL_H + GAP), partial);
  }
  plan_buf_puts(&b, "</svg>\n");
  free(cells);
  return plan_buf_take(&b, text, len);
}
