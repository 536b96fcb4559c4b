// backprop: the two GPU phases of one training step of a two-layer perceptron, in the style of Rodinia's
// backprop (written for this corpus). Layout: input has in+1 entries (entry 0 is the bias unit), weights
// are (in+1) x (hid+1) row-major (column 0 unused), hidden units are 1..hid.
//   bp_layer_forward:  partial[by][j] = sum over the block's 16 inputs i of input[i] * w[i][j]
//                      (16 x 16 blocks, products staged in shared memory, tree reduction over y)
//   bp_layer_squash:   hidden[j] = sigmoid(sum over blocks of partial[.][j])
//   bp_adjust_weights: momentum update dw = eta * delta[j] * x[i] + momentum * old[i][j]; w += dw

constexpr int kB = 16;
constexpr float kEta = 0.3f;
constexpr float kMomentum = 0.3f;

extern "C" __global__ void bp_layer_forward(const float* input, const float* w, float* partial, int in,
                                            int hid) {
  __shared__ float x[kB];
  __shared__ float prod[kB][kB];
  int tx = threadIdx.x, ty = threadIdx.y;
  int i = blockIdx.y * kB + ty + 1;  // input unit (skips the bias row)
  int j = blockIdx.x * kB + tx + 1;  // hidden unit
  if (tx == 0) x[ty] = i <= in ? input[i] : 0.0f;
  __syncthreads();
  prod[ty][tx] = (i <= in && j <= hid) ? x[ty] * w[i * (hid + 1) + j] : 0.0f;
  __syncthreads();
  for (int step = kB / 2; step > 0; step /= 2) {
    if (ty < step) prod[ty][tx] += prod[ty + step][tx];
    __syncthreads();
  }
  if (ty == 0 && j <= hid) partial[blockIdx.y * hid + (j - 1)] = prod[0][tx];
}

extern "C" __global__ void bp_layer_squash(const float* partial, const float* input, const float* w,
                                           float* hidden, int blocks, int hid) {
  int j = blockIdx.x * blockDim.x + threadIdx.x + 1;
  if (j > hid) return;
  float sum = input[0] * w[j];  // the bias unit's contribution
  for (int b = 0; b < blocks; ++b) sum += partial[b * hid + (j - 1)];
  hidden[j] = 1.0f / (1.0f + __expf(-sum));
}

extern "C" __global__ void bp_adjust_weights(const float* delta, const float* x, float* w, float* old_w,
                                             int in, int hid) {
  int j = blockIdx.x * blockDim.x + threadIdx.x + 1;
  int i = blockIdx.y * blockDim.y + threadIdx.y;
  if (i > in || j > hid) return;
  int k = i * (hid + 1) + j;
  float dw = kEta * delta[j] * x[i] + kMomentum * old_w[k];
  w[k] += dw;
  old_w[k] = dw;
}
