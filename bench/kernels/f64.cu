// f64: double-precision arithmetic and math. out has 12 doubles per input element:
//   a+b, a*b, a/b, fma(a,b,c), sqrt(|a|), 1/b, min, max, (double)(float)a, floor(a), exp(a/8), sin(a)
// exp and sin expand into nvcc's own range reduction and polynomials (including a local array and a call
// to its slow-path reduction), so they exercise much of the instruction set in f64.

extern "C" __global__ void f64_math(const double* a, const double* b, const double* c, double* out,
                                    int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  double x = a[i], y = b[i], z = c[i];
  double* o = out + 12 * i;
  o[0] = x + y;
  o[1] = x * y;
  o[2] = x / y;
  o[3] = fma(x, y, z);
  o[4] = sqrt(fabs(x));
  o[5] = 1.0 / y;
  o[6] = fmin(x, y);
  o[7] = fmax(x, y);
  o[8] = (double)(float)x;
  o[9] = floor(x);
  o[10] = exp(x / 8.0);
  o[11] = sin(x);
}
