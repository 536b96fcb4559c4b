// hotspot: one explicit time step of a 2D thermal simulation on a rows x cols grid, in the style of
// Rodinia's hotspot (written for this corpus). Each 16 x 16 block stages its tile of temperatures in shared
// memory; neighbours outside the tile come from global memory; the grid edge is clamped (insulated).

constexpr int kT = 16;

struct HotspotParams {
  float step_div_cap;  // dt / C
  float rx_1, ry_1, rz_1;  // 1/Rx, 1/Ry, 1/Rz
  float ambient;
};

extern "C" __global__ void hotspot(const float* power, const float* temp, float* out, int rows, int cols,
                                   HotspotParams p) {
  __shared__ float tile[kT][kT];
  int tx = threadIdx.x, ty = threadIdx.y;
  int c = blockIdx.x * kT + tx;
  int r = blockIdx.y * kT + ty;
  bool inside = r < rows && c < cols;
  tile[ty][tx] = inside ? temp[r * cols + c] : 0.0f;
  __syncthreads();
  if (!inside) return;
  int rn = r > 0 ? r - 1 : r, rs = r < rows - 1 ? r + 1 : r;
  int cw = c > 0 ? c - 1 : c, ce = c < cols - 1 ? c + 1 : c;
  float t = tile[ty][tx];
  float north = (ty > 0 && rn == r - 1) ? tile[ty - 1][tx] : temp[rn * cols + c];
  float south = (ty < kT - 1 && rs == r + 1) ? tile[ty + 1][tx] : temp[rs * cols + c];
  float west = (tx > 0 && cw == c - 1) ? tile[ty][tx - 1] : temp[r * cols + cw];
  float east = (tx < kT - 1 && ce == c + 1) ? tile[ty][tx + 1] : temp[r * cols + ce];
  float delta = p.step_div_cap * (power[r * cols + c] + (south + north - 2.0f * t) * p.ry_1 +
                                  (east + west - 2.0f * t) * p.rx_1 + (p.ambient - t) * p.rz_1);
  out[r * cols + c] = t + delta;
}
