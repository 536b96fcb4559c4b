// srad: speckle-reducing anisotropic diffusion on a rows x cols image, in the style of Rodinia's srad
// (written for this corpus). One iteration is two launches:
//   srad_coeff:  directional derivatives dN/dS/dW/dE (edges clamped) and the diffusion coefficient c in [0,1]
//   srad_update: j += lambda/4 * divergence(c * gradient)
// q0sqr (the speckle scale) is computed by the host from the image statistics before each iteration.

extern "C" __global__ void srad_coeff(const float* j, float* c, float* dn, float* ds, float* dw,
                                      float* de, int rows, int cols, float q0sqr) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= cols || y >= rows) return;
  int k = y * cols + x;
  float jc = j[k];
  float n = j[(y > 0 ? y - 1 : 0) * cols + x] - jc;
  float s = j[(y < rows - 1 ? y + 1 : rows - 1) * cols + x] - jc;
  float w = j[y * cols + (x > 0 ? x - 1 : 0)] - jc;
  float e = j[y * cols + (x < cols - 1 ? x + 1 : cols - 1)] - jc;
  float g2 = (n * n + s * s + w * w + e * e) / (jc * jc);
  float l = (n + s + w + e) / jc;
  float num = 0.5f * g2 - (1.0f / 16.0f) * (l * l);
  float den = 1.0f + 0.25f * l;
  float qsqr = num / (den * den);
  den = (qsqr - q0sqr) / (q0sqr * (1.0f + q0sqr));
  float coeff = 1.0f / (1.0f + den);
  c[k] = coeff < 0.0f ? 0.0f : (coeff > 1.0f ? 1.0f : coeff);
  dn[k] = n;
  ds[k] = s;
  dw[k] = w;
  de[k] = e;
}

extern "C" __global__ void srad_update(float* j, const float* c, const float* dn, const float* ds,
                                       const float* dw, const float* de, int rows, int cols,
                                       float lambda) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= cols || y >= rows) return;
  int k = y * cols + x;
  float cn = c[k];
  float cs = c[(y < rows - 1 ? y + 1 : rows - 1) * cols + x];
  float cw = c[k];
  float ce = c[y * cols + (x < cols - 1 ? x + 1 : cols - 1)];
  float d = cn * dn[k] + cs * ds[k] + cw * dw[k] + ce * de[k];
  j[k] = j[k] + 0.25f * lambda * d;
}
