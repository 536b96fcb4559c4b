// Whether two descriptors name the same file (device and inode): how the tests of BAR remap tell
// which memory a BAR_MAP handed out (a VM's own VRAM memfd, its scratch memory, the GPU's VRAM
// file) when the descriptor numbers differ (duplicates, SCM_RIGHTS copies).
//
// Threading: a pure function.
#ifndef GPUVM_AGGREGATOR_TESTING_SAME_FILE_H_
#define GPUVM_AGGREGATOR_TESTING_SAME_FILE_H_

#include <sys/stat.h>

namespace gpuvm::aggregator::testing {

// False when either descriptor is invalid.
inline bool SameFile(int a, int b) {
  struct stat x, y;
  return a >= 0 && b >= 0 && ::fstat(a, &x) == 0 && ::fstat(b, &y) == 0 && x.st_dev == y.st_dev &&
         x.st_ino == y.st_ino;
}

}  // namespace gpuvm::aggregator::testing

#endif  // GPUVM_AGGREGATOR_TESTING_SAME_FILE_H_
