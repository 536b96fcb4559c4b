// Object classes a GF100 channel can bind to its subchannels, and the methods of each class the
// software GPU executes. Sources (per section below): nouveau include/nvhw/class/cl906f.h and
// cl9039.h (NVIDIA's class headers), NVIDIA open-gpu-doc classes/dma-copy/cl90b5.h (as carried by
// mesa's nvk), envytools rnndb/graph/gf100_m2mf.xml, rnndb/blob_nvc0_pcopy.xml,
// rnndb/graph/gf100_compute.xml and
// docs/FERMI-FACTS.md. Facts only.
#ifndef GPUVM_GPU_HW_CLASSES_H_
#define GPUVM_GPU_HW_CLASSES_H_

#include <cstdint>

namespace gpuvm::gf100 {

// ---- Class ids ----
inline constexpr uint32_t kClassChannelGpfifo = 0x906f;  // GF100_CHANNEL_GPFIFO
inline constexpr uint32_t kClassM2mf = 0x9039;           // FERMI_MEMORY_TO_MEMORY_FORMAT_A
inline constexpr uint32_t kClassCopy = 0x90b5;           // GF100_DMA_COPY (PCOPY)
inline constexpr uint32_t kClassCompute = 0x90c0;        // FERMI_COMPUTE_A
inline constexpr uint32_t kClass3d = 0x9097;             // FERMI_A (3D; not modelled)
inline constexpr uint32_t kClass2d = 0x902d;             // FERMI_TWOD_A (not modelled)

// ---- Channel (host) methods, valid on every subchannel: method < 0x100 (cl906f.h) ----
namespace host {
inline constexpr uint32_t kSetObject = 0x0000;  // bits 0-15 class id, bits 16-20 engine
inline constexpr uint32_t kSetObjectClassMask = 0xffff;
inline constexpr uint32_t kSemaphoreA = 0x0010;  // bits 0-7: address bits 32-39
inline constexpr uint32_t kSemaphoreB = 0x0014;  // bits 2-31: address bits 2-31
inline constexpr uint32_t kSemaphoreC = 0x0018;  // payload
inline constexpr uint32_t kSemaphoreD = 0x001c;  // trigger
inline constexpr uint32_t kNonStallInterrupt = 0x0020;
inline constexpr uint32_t kSetReference = 0x0050;
inline constexpr uint32_t kFirstClassMethod = 0x0100;
// SEMAPHORED: bits 0-3 operation, bit 12 ACQUIRE_SWITCH, bit 20 RELEASE_WFI (0 = wait for idle),
// bit 24 RELEASE_SIZE (0 = 16-byte report {payload, 0, timestamp64}, 1 = 4-byte payload).
inline constexpr uint32_t kSemOpMask = 0xf;
inline constexpr uint32_t kSemOpAcquire = 0x1;  // wait until *addr == payload
inline constexpr uint32_t kSemOpRelease = 0x2;
inline constexpr uint32_t kSemOpAcqGeq = 0x4;  // wait until *addr >= payload
inline constexpr uint32_t kSemOpAcqAnd = 0x8;  // wait until (*addr & payload) != 0
inline constexpr uint32_t kSemAcquireSwitch = 1u << 12;
inline constexpr uint32_t kSemReleaseWfiDisable = 1u << 20;
inline constexpr uint32_t kSemReleaseSize4 = 1u << 24;
}  // namespace host

// ---- M2MF 0x9039 (gf100_m2mf.xml, cl9039.h) ----
namespace m2mf {
inline constexpr uint32_t kOffsetOutHigh = 0x0238;
inline constexpr uint32_t kOffsetOutLow = 0x023c;
inline constexpr uint32_t kExec = 0x0300;  // NVIDIA: LAUNCH_DMA
inline constexpr uint32_t kData = 0x0304;
inline constexpr uint32_t kOffsetInHigh = 0x030c;
inline constexpr uint32_t kOffsetInLow = 0x0310;
inline constexpr uint32_t kPitchIn = 0x0314;
inline constexpr uint32_t kPitchOut = 0x0318;
inline constexpr uint32_t kLineLengthIn = 0x031c;
inline constexpr uint32_t kLineCount = 0x0320;
inline constexpr uint32_t kQueryAddressHigh = 0x032c;
inline constexpr uint32_t kQueryAddressLow = 0x0330;
inline constexpr uint32_t kQuerySequence = 0x0334;
// EXEC bits: 0 PUSH (source is inline DATA), 4 LINEAR_IN (pitch layout), 8 LINEAR_OUT, 12-13 QUERY
// (2 = write QUERY_SEQUENCE when done), 16-17 interrupt, 20 QUERY_SHORT (4-byte instead of 16-byte
// report).
inline constexpr uint32_t kExecPush = 1u << 0;
inline constexpr uint32_t kExecLinearIn = 1u << 4;
inline constexpr uint32_t kExecLinearOut = 1u << 8;
inline constexpr uint32_t kExecQueryShift = 12;
inline constexpr uint32_t kExecQueryMask = 0x3;
inline constexpr uint32_t kExecQueryYes = 2;
inline constexpr uint32_t kExecInterruptShift = 16;
inline constexpr uint32_t kExecInterruptMask = 0x3;
inline constexpr uint32_t kExecQueryShort = 1u << 20;
}  // namespace m2mf

// ---- PCOPY 0x90b5 (NVIDIA cl90b5.h; the same offsets as envytools blob_nvc0_pcopy.xml) ----
// nouveau's own falcon firmware for the copy engine exposes a different, GT215-style layout
// (OFFSET_IN at 0x30c, see nouveau_bo90b5.c "Fixup class to be compatible with NVIDIA's"); we
// follow the class as NVIDIA defines it.
namespace copy {
inline constexpr uint32_t kSetSemaphoreA = 0x0240;  // bits 0-7: address bits 32-39
inline constexpr uint32_t kSetSemaphoreB = 0x0244;
inline constexpr uint32_t kSetSemaphorePayload = 0x0248;
inline constexpr uint32_t kLaunchDma = 0x0300;
inline constexpr uint32_t kOffsetInUpper = 0x0400;
inline constexpr uint32_t kOffsetInLower = 0x0404;
inline constexpr uint32_t kOffsetOutUpper = 0x0408;
inline constexpr uint32_t kOffsetOutLower = 0x040c;
inline constexpr uint32_t kPitchIn = 0x0410;
inline constexpr uint32_t kPitchOut = 0x0414;
inline constexpr uint32_t kLineLengthIn = 0x0418;
inline constexpr uint32_t kLineCount = 0x041c;
// LAUNCH_DMA: bits 0-1 DATA_TRANSFER_TYPE (0 none, 1 pipelined, 2 non-pipelined), bit 2
// FLUSH_ENABLE, bits 3-4 SEMAPHORE_TYPE (1 one-word, 2 four-word), bits 5-6 INTERRUPT_TYPE (1
// blocking, 2 non-blocking), bit 7 SRC_MEMORY_LAYOUT (1 pitch, 0 block-linear), bit 8
// DST_MEMORY_LAYOUT, bit 9 MULTI_LINE_ENABLE, bit 10 REMAP_ENABLE.
inline constexpr uint32_t kTransferTypeMask = 0x3;
inline constexpr uint32_t kSemaphoreTypeShift = 3;
inline constexpr uint32_t kSemaphoreTypeMask = 0x3;
inline constexpr uint32_t kSemaphoreOneWord = 1;
inline constexpr uint32_t kSemaphoreFourWord = 2;
inline constexpr uint32_t kInterruptTypeShift = 5;
inline constexpr uint32_t kInterruptTypeMask = 0x3;
inline constexpr uint32_t kSrcPitch = 1u << 7;
inline constexpr uint32_t kDstPitch = 1u << 8;
inline constexpr uint32_t kMultiLine = 1u << 9;
inline constexpr uint32_t kRemap = 1u << 10;
}  // namespace copy

// ---- Compute 0x90c0 (gf100_compute.xml; docs/FERMI-FACTS.md) ----
namespace compute {
inline constexpr uint32_t kSharedBase = 0x0214;
inline constexpr uint32_t kGridDimYX = 0x0238;  // x bits 0-15, y bits 16-31
inline constexpr uint32_t kGridDimZ = 0x023c;
inline constexpr uint32_t kSharedSize = 0x024c;
inline constexpr uint32_t kLaunch = 0x0368;
inline constexpr uint32_t kBlockDimYX = 0x03ac;  // x bits 0-15, y bits 16-31
inline constexpr uint32_t kBlockDimZ = 0x03b0;
inline constexpr uint32_t kCpStartId = 0x03b4;
inline constexpr uint32_t kLocalBase = 0x077c;
inline constexpr uint32_t kTempAddressHigh = 0x0790;
inline constexpr uint32_t kTempAddressLow = 0x0794;
inline constexpr uint32_t kTempSizeHigh = 0x0798;
inline constexpr uint32_t kTempSizeLow = 0x079c;
inline constexpr uint32_t kWatchdogTimer = 0x0de4;
inline constexpr uint32_t kCodeAddressHigh = 0x1608;
inline constexpr uint32_t kCodeAddressLow = 0x160c;
inline constexpr uint32_t kCbBind = 0x1694;  // bit 0 valid, bits 8-12 index
inline constexpr uint32_t kCbBindValid = 1u << 0;
inline constexpr uint32_t kCbBindIndexShift = 8;
inline constexpr uint32_t kCbBindIndexMask = 0x1f;
inline constexpr uint32_t kFlush = 0x1698;  // bit 0 CODE, bit 4 GLOBAL, bit 12 CB
inline constexpr uint32_t kFlushCode = 1u << 0;
inline constexpr uint32_t kQueryAddressHigh = 0x1b00;
inline constexpr uint32_t kQueryAddressLow = 0x1b04;
inline constexpr uint32_t kQuerySequence = 0x1b08;
inline constexpr uint32_t kQueryGet = 0x1b0c;  // bits 0-1 mode, bit 20 INTR, bit 28 SHORT
inline constexpr uint32_t kQueryGetIntr = 1u << 20;
inline constexpr uint32_t kQueryGetShort = 1u << 28;
inline constexpr uint32_t kCbSize = 0x2380;
inline constexpr uint32_t kCbAddressHigh = 0x2384;
inline constexpr uint32_t kCbAddressLow = 0x2388;
inline constexpr uint32_t kCbPos = 0x238c;
// 16 consecutive methods, each uploads one word at CB_POS
inline constexpr uint32_t kCbData = 0x2390;
inline constexpr uint32_t kCbDataCount = 16;
}  // namespace compute

}  // namespace gpuvm::gf100

#endif  // GPUVM_GPU_HW_CLASSES_H_
