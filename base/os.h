// Small RAII wrappers over the Linux objects gpuvm's processes share with each other: file
// descriptors, shared mappings, sealed memfds (guest RAM, VRAM, rings), eventfds (doorbells),
// SOCK_SEQPACKET unix sockets and fd passing over them (SCM_RIGHTS), and the atomic loads and
// stores every access to memory shared with another process goes through. Used by the local
// hypervisor backend, the device model <-> aggregator protocol (ipc/), the aggregator, the guest
// driver's trap bus, tools, benchmarks and tests.
//
// Threading: values owned by one thread at a time.
#ifndef GPUVM_BASE_OS_H_
#define GPUVM_BASE_OS_H_

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gpuvm::os {

// Every access to memory shared with another process goes through these: single loads and stores
// the compiler can neither tear, repeat nor elide, with the given ordering.
template <typename T>
T LoadShared(const T& word, std::memory_order order = std::memory_order_acquire) {
  return std::atomic_ref<T>(const_cast<T&>(word)).load(order);
}
template <typename T>
void StoreShared(T& word, T value, std::memory_order order = std::memory_order_release) {
  std::atomic_ref<T>(word).store(value, order);
}

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset();
  // A new descriptor for the same open file (F_DUPFD_CLOEXEC).
  Result<UniqueFd> Duplicate() const;

 private:
  int fd_ = -1;
};

// A MAP_SHARED mapping, unmapped on destruction. One of kHugePageBytes or more is placed and
// advised for huge pages (ReserveHugeAligned, AdviseHugePages below).
class SharedMapping {
 public:
  SharedMapping() = default;
  static Result<SharedMapping> Map(int fd, uint64_t offset, size_t length, bool writable);
  ~SharedMapping();
  SharedMapping(SharedMapping&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), length_(std::exchange(other.length_, 0)) {}
  SharedMapping& operator=(SharedMapping&& other) noexcept;
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;

  uint8_t* data() const { return data_; }
  size_t length() const { return length_; }
  std::span<uint8_t> bytes() const { return {data_, length_}; }

 private:
  uint8_t* data_ = nullptr;
  size_t length_ = 0;
};

// Maps every page of [address, address + length) (page aligned, inside a shared or private writable
// mapping) in one system call, for the access the caller expects next (Linux 5.14+:
// MADV_POPULATE_READ / MADV_POPULATE_WRITE). False when the kernel cannot (an old kernel, memory
// pressure, a foreign mapping): the pages then fault in one by one at first touch, which is only
// slower.
//
// Which one (measured on the nested-paging hosts we run on, 128 MiB of a memfd mapped a second
// time): a read populate installs clean entries, and the first store to each page then costs the
// CPU a dirty-bit update in the page table, ~0.5 us a page there (memset 27 ms instead of 11 ms);
// a write populate installs them dirty for ~40 % more than the read populate (13 ms against 8 ms).
// So memory that will be written (pinned host memory, the destination of a copy, VRAM) is
// populated for write; memory that will only be read, for read. MAP_POPULATE on a shared mapping
// is the read kind.
enum class PopulateFor { kRead, kWrite };
bool PopulatePages(void* address, uint64_t length, PopulateFor access);

// Huge pages for bulk memory (guest RAM, pinned host memory, VRAM): a 2 MiB block of memory that
// one page-table entry maps costs one entry to install instead of 512. Each process that maps
// shared memory installs its own entries, and on the nested-paging hosts we run on ~1 us each: a
// guest's 64 MiB of pinned memory costs its process 16 384 of them, and the aggregator, whose GPU
// reaches the same pages, 16 384 more. With huge pages it is 32 + 32.
//
// Linux gives them only where the host allows it (transparent huge pages:
// /sys/kernel/mm/transparent_hugepage/enabled for private anonymous memory, .../shmem_enabled for
// memfds, "advise" or better), and only to a block whose virtual address is congruent to its file
// offset modulo 2 MiB. So these helpers reserve an address with that congruence and ask for huge
// pages (MADV_HUGEPAGE); where the host does not allow them the memory is 4 KiB pages as before.
inline constexpr uint64_t kHugePageBytes = 2ull << 20;
// Reserves [result, result + length) of address space (PROT_NONE, nothing backed) at an address
// congruent to `phase` modulo kHugePageBytes, for the caller to map over with MAP_FIXED.
Result<void*> ReserveHugeAligned(size_t length, uint64_t phase);
// Asks for huge pages in [address, address + length) (page aligned); false when the kernel
// refused (the memory then stays 4 KiB pages).
bool AdviseHugePages(void* address, size_t length);
// mmap(2) of `length` bytes at an address ReserveHugeAligned picks for `offset`, advised for huge
// pages: `flags` MAP_SHARED with a file, or MAP_PRIVATE | MAP_ANONYMOUS with fd -1 (offset 0).
// Nothing stays mapped on failure.
Result<void*> MapHugeAligned(size_t length, int prot, int flags, int fd, uint64_t offset);

// A sealed memfd of `bytes` zero bytes: it can neither shrink nor grow, so a peer holding it cannot
// make our mappings of it fault (SIGBUS) by truncating it.
Result<UniqueFd> CreateSealedMemfd(const char* name, uint64_t bytes);
// OK when `fd` is a memfd of exactly `bytes` bytes that can no longer shrink or grow.
Status CheckSealedMemfd(int fd, uint64_t bytes);
// A close-on-exec duplicate of a descriptor we do not own.
Result<UniqueFd> DuplicateFd(int fd);
Result<UniqueFd> CreateEventFd();
// Names the calling thread (what `top -H`, `ps -T` and `perf sched` show; Linux keeps at most 15
// bytes, the rest is cut). Best effort: a name that cannot be set changes nothing else.
void NameThisThread(const char* name);
// Adds 1 to an eventfd counter; a full counter (never in practice) is not an error.
Status SignalEventFd(int fd);
// Reads and clears an eventfd counter without blocking; 0 when it was already clear.
uint64_t DrainEventFd(int fd);
// Waits up to timeout_ms (-1 = forever) for `fd` to become readable. DeadlineExceeded on timeout.
Status WaitReadable(int fd, int timeout_ms);
// A descriptor for process `pid` (pidfd_open): readable once the process has ended, so a wait
// can watch a peer's life without a timer. NotFound when there is no such process (any more);
// Unimplemented on kernels before 5.3.
Result<UniqueFd> OpenPidFd(int pid);

// Unix SOCK_SEQPACKET sockets; a path starting with '@' names the abstract namespace.
// Listen refuses a path where a live listener answers (AlreadyExists) and replaces a stale socket
// file.
Result<UniqueFd> ListenSeqpacket(const std::string& path, int backlog = 64);
// Binds like ListenSeqpacket but does not listen yet: the name is ours (a second server fails
// here), while clients are refused (ECONNREFUSED) until StartListening, so a server that sets up
// more after binding is not seen as ready before it is.
Result<UniqueFd> BindSeqpacket(const std::string& path);
Status StartListening(int fd, int backlog = 64);
Result<UniqueFd> ConnectSeqpacket(const std::string& path);

// One datagram plus up to kMaxPassedFds descriptors over a SOCK_SEQPACKET/SOCK_DGRAM unix socket.
inline constexpr size_t kMaxPassedFds = 96;
Status SendWithFds(int socket, std::span<const uint8_t> bytes, std::span<const int> fds);
struct ReceivedMessage {
  std::vector<uint8_t> bytes;
  std::vector<UniqueFd> fds;
};
// Receives one message of at most max_bytes. Unavailable when the peer closed the connection;
// DataLoss when the message or its descriptors were truncated. With `nonblocking`, nullopt-like
// behaviour is signalled as DeadlineExceeded when nothing is queued.
Result<ReceivedMessage> ReceiveWithFds(int socket, size_t max_bytes, bool nonblocking);

// Who is at the other end of a connected unix socket (SO_PEERCRED: as of its connect()), with its
// supplementary groups (SO_PEERGROUPS, also as of its connect; empty on kernels before 4.13).
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
};
Result<PeerCredentials> PeerCredentialsOf(int socket);
// True when `group` is the peer's primary or one of its supplementary groups.
bool PeerInGroup(const PeerCredentials& peer, gid_t group);
// A group by name or number (the operator's --socket-group): NotFound for a name no group has.
Result<gid_t> LookupGroup(const std::string& name_or_gid);
// Gives a filesystem socket (not '@': the abstract namespace has no file modes) to `group`, mode
// 0660: its members may connect, other users may not even try. Call before listening.
Status ShareSocketWithGroup(const std::string& path, gid_t group);
// "uid 65534 (pid 4242)".
std::string DescribePeer(const PeerCredentials& peer);

// Refusing a peer: `message` (already encoded, e.g. an ERROR) is sent without blocking, then
// whatever the peer had queued is read and discarded (descriptors closed) — a unix socket closed
// with unread data makes the peer's next receive fail with ECONNRESET, and it should see our
// message instead. The caller closes the socket afterwards.
void SendPartingMessage(int socket, std::span<const uint8_t> message);
// The other side of it: after a send or receive failed because the peer hung up, the last message
// the peer queued before closing (typically why), skipping the one ECONNRESET a peer that closed
// with our data unread leaves behind. Unavailable or DeadlineExceeded when there is none.
Result<ReceivedMessage> ReceivePartingMessage(int socket, size_t max_bytes);

}  // namespace gpuvm::os

#endif  // GPUVM_BASE_OS_H_
