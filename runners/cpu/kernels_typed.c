/* The typed numeric kernels: the template kernels_tmpl.h instantiated for
 * double (F64) and float (F32, and BF16/F16 which compute in float). */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "kernels_int.h"
#include "libplan/ops.h"
#include "base/numeric.h"

#define R double
#define F(name) name##_f64
#define MF(fn) fn
#define GEMM cblas_dgemm
#define TABLE plan_kernels_f64
#include "kernels_tmpl.h"
#undef R
#undef F
#undef MF
#undef GEMM
#undef TABLE

#define R float
#define F(name) name##_f32
#define MF(fn) fn##f
#define GEMM cblas_sgemm
#define TABLE plan_kernels_f32
#include "kernels_tmpl.h"
#undef R
#undef F
#undef MF
#undef GEMM
#undef TABLE
