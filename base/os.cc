#include "base/os.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace gpuvm::os {

void UniqueFd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<UniqueFd> UniqueFd::Duplicate() const {
  const int copy = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return Status::FromErrno(errno, "dup");
  return UniqueFd(copy);
}

Result<void*> ReserveHugeAligned(size_t length, uint64_t phase) {
  if (length == 0) return Status::InvalidArgument("empty reservation");
  const size_t slack = kHugePageBytes;
  if (length > SIZE_MAX - slack) return Status::InvalidArgument("reservation too large");
  void* p = ::mmap(nullptr, length + slack, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
  if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap (address space)");
  const auto raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t want = phase % kHugePageBytes;
  const uintptr_t at = raw + ((want - raw % kHugePageBytes) + kHugePageBytes) % kHugePageBytes;
  // Give back the slack on both sides.
  if (at > raw) ::munmap(p, at - raw);
  if (raw + length + slack > at + length)
    ::munmap(reinterpret_cast<void*>(at + length), raw + length + slack - (at + length));
  return reinterpret_cast<void*>(at);
}

bool AdviseHugePages(void* address, size_t length) {
  return length == 0 || ::madvise(address, length, MADV_HUGEPAGE) == 0;
}

Result<void*> MapHugeAligned(size_t length, int prot, int flags, int fd, uint64_t offset) {
  GPUVM_ASSIGN_OR_RETURN(void* at, ReserveHugeAligned(length, offset));
  if (::mmap(at, length, prot, flags | MAP_FIXED, fd, static_cast<off_t>(offset)) != at) {
    const int err = errno;
    ::munmap(at, length);
    return Status::FromErrno(err, "mmap");
  }
  AdviseHugePages(at, length);
  return at;
}

Result<SharedMapping> SharedMapping::Map(int fd, uint64_t offset, size_t length, bool writable) {
  if (length == 0) return Status::InvalidArgument("empty mapping");
  const int prot = PROT_READ | (writable ? PROT_WRITE : 0);
  void* p = MAP_FAILED;
  if (length >= kHugePageBytes) {
    GPUVM_ASSIGN_OR_RETURN(p, MapHugeAligned(length, prot, MAP_SHARED, fd, offset));
  } else {
    p = ::mmap(nullptr, length, prot, MAP_SHARED, fd, static_cast<off_t>(offset));
    if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap");
  }
  SharedMapping m;
  m.data_ = static_cast<uint8_t*>(p);
  m.length_ = length;
  return m;
}

SharedMapping::~SharedMapping() {
  if (data_ != nullptr) ::munmap(data_, length_);
}

SharedMapping& SharedMapping::operator=(SharedMapping&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, length_);
    data_ = std::exchange(other.data_, nullptr);
    length_ = std::exchange(other.length_, 0);
  }
  return *this;
}

Result<UniqueFd> CreateSealedMemfd(const char* name, uint64_t bytes) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return Status::FromErrno(errno, "memfd_create");
  if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    return Status::FromErrno(errno, "ftruncate memfd");
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return Status::FromErrno(errno, "seal memfd");
  }
  return fd;
}

Status CheckSealedMemfd(int fd, uint64_t bytes) {
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) return Status::FromErrno(errno, "F_GET_SEALS (not a memfd?)");
  if ((seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW)) {
    return Status::PermissionDenied("memfd is not sealed against resizing");
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno(errno, "fstat memfd");
  if (static_cast<uint64_t>(st.st_size) != bytes) {
    return Status::InvalidArgument("memfd has " + std::to_string(st.st_size) + " bytes, expected " +
                                   std::to_string(bytes));
  }
  return Status::Ok();
}

Result<UniqueFd> DuplicateFd(int fd) {
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return Status::FromErrno(errno, "dup");
  return UniqueFd(copy);
}

void NameThisThread(const char* name) {
  char cut[16] = {};
  std::strncpy(cut, name, sizeof cut - 1);
  (void)pthread_setname_np(pthread_self(), cut);
}

Result<UniqueFd> CreateEventFd() {
  UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd.valid()) return Status::FromErrno(errno, "eventfd");
  return fd;
}

Status SignalEventFd(int fd) {
  const uint64_t one = 1;
  for (;;) {
    if (::write(fd, &one, sizeof(one)) == sizeof(one)) return Status::Ok();
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return Status::Ok();  // counter saturated: the reader is already signalled
    return Status::FromErrno(errno, "signal eventfd");
  }
}

uint64_t DrainEventFd(int fd) {
  uint64_t value = 0;
  for (;;) {
    if (::read(fd, &value, sizeof(value)) == sizeof(value)) return value;
    if (errno == EINTR) continue;
    return 0;
  }
}

bool PopulatePages(void* address, uint64_t length, PopulateFor access) {
#ifndef MADV_POPULATE_READ
  constexpr int MADV_POPULATE_READ = 22;
#endif
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;
#endif
  if (length == 0) return true;
  return ::madvise(address, length,
                   access == PopulateFor::kWrite ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0;
}

Status WaitReadable(int fd, int timeout_ms) {
  pollfd pfd{fd, POLLIN, 0};
  for (;;) {
    const int ready = ::poll(&pfd, 1, timeout_ms);
    if (ready > 0) return Status::Ok();
    if (ready == 0) return Status::DeadlineExceeded("timed out waiting");
    if (errno != EINTR) return Status::FromErrno(errno, "poll");
  }
}

Result<UniqueFd> OpenPidFd(int pid) {
  if (pid <= 0) return Status::InvalidArgument("no process " + std::to_string(pid));
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd >= 0) {
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // pidfds are close-on-exec already; be explicit
    return UniqueFd(fd);
  }
  if (errno == ESRCH) return Status::NotFound("no process " + std::to_string(pid));
  if (errno == ENOSYS) return Status::Unimplemented("pidfd_open: kernel older than 5.3");
  return Status::FromErrno(errno, "pidfd_open");
}

namespace {

Result<sockaddr_un> UnixAddress(const std::string& path, socklen_t* length) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("unix socket path empty or too long: '" + path + "'");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  if (path[0] == '@') addr.sun_path[0] = '\0';
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  return addr;
}

}  // namespace

Result<UniqueFd> BindSeqpacket(const std::string& path) {
  socklen_t length = 0;
  GPUVM_ASSIGN_OR_RETURN(sockaddr_un addr, UnixAddress(path, &length));
  if (path[0] != '@') {
    if (ConnectSeqpacket(path).ok()) {
      return Status::AlreadyExists("something already listens on " + path);
    }
    ::unlink(path.c_str());  // a stale socket file from a dead listener
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Status::FromErrno(errno, "socket");
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), length) != 0) {
    if (errno == EADDRINUSE) return Status::AlreadyExists("something already listens on " + path);
    return Status::FromErrno(errno, "bind " + path);
  }
  return fd;
}

Status StartListening(int fd, int backlog) {
  if (::listen(fd, backlog) != 0) return Status::FromErrno(errno, "listen");
  return Status::Ok();
}

Result<UniqueFd> ListenSeqpacket(const std::string& path, int backlog) {
  GPUVM_ASSIGN_OR_RETURN(UniqueFd fd, BindSeqpacket(path));
  if (Status s = StartListening(fd.get(), backlog); !s.ok()) return s.WithContext(path);
  return fd;
}

Result<UniqueFd> ConnectSeqpacket(const std::string& path) {
  socklen_t length = 0;
  GPUVM_ASSIGN_OR_RETURN(sockaddr_un addr, UnixAddress(path, &length));
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Status::FromErrno(errno, "socket");
  for (;;) {
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), length) == 0) return fd;
    if (errno == EINTR) continue;
    if (errno == ENOENT || errno == ECONNREFUSED) {
      return Status::Unavailable("nothing listens on " + path);
    }
    return Status::FromErrno(errno, "connect " + path);
  }
}

Status SendWithFds(int socket, std::span<const uint8_t> bytes, std::span<const int> fds) {
  if (fds.size() > kMaxPassedFds) return Status::InvalidArgument("too many descriptors to pass");
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    const ssize_t sent = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (sent == static_cast<ssize_t>(bytes.size())) return Status::Ok();
    if (sent >= 0) return Status::DataLoss("short send on a message socket");
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) {
      return Status::Unavailable("peer closed the connection");
    }
    return Status::FromErrno(errno, "sendmsg");
  }
}

Result<ReceivedMessage> ReceiveWithFds(int socket, size_t max_bytes, bool nonblocking) {
  ReceivedMessage out;
  out.bytes.resize(max_bytes);
  iovec iov{out.bytes.data(), out.bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t got;
  for (;;) {
    got = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | (nonblocking ? MSG_DONTWAIT : 0));
    if (got >= 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return Status::DeadlineExceeded("no message queued");
    if (errno == ECONNRESET) return Status::Unavailable("peer closed the connection");
    return Status::FromErrno(errno, "recvmsg");
  }
  // Take ownership of every passed descriptor first, so none leaks whatever happens next.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      out.fds.emplace_back(fd);
    }
  }
  if (got == 0 && out.fds.empty()) return Status::Unavailable("peer closed the connection");
  if (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
    return Status::DataLoss("message or its descriptors truncated");
  }
  out.bytes.resize(static_cast<size_t>(got));
  return out;
}

Result<PeerCredentials> PeerCredentialsOf(int socket) {
  ucred cred{};
  socklen_t length = sizeof cred;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    return Status::FromErrno(errno, "SO_PEERCRED");
  }
  PeerCredentials peer{cred.pid, cred.uid, cred.gid, {}};
  // The supplementary groups: ERANGE says how many there are (a peer can be in up to 65536).
  socklen_t bytes = 0;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERGROUPS, nullptr, &bytes) != 0 && errno == ERANGE &&
      bytes != 0) {
    peer.groups.resize(bytes / sizeof(gid_t));
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERGROUPS, peer.groups.data(), &bytes) != 0) {
      return Status::FromErrno(errno, "SO_PEERGROUPS");
    }
    peer.groups.resize(bytes / sizeof(gid_t));
  }
  return peer;
}

bool PeerInGroup(const PeerCredentials& peer, gid_t group) {
  if (peer.gid == group) return true;
  for (gid_t g : peer.groups) {
    if (g == group) return true;
  }
  return false;
}

Result<gid_t> LookupGroup(const std::string& name_or_gid) {
  if (name_or_gid.empty()) return Status::InvalidArgument("no group named");
  if (name_or_gid.find_first_not_of("0123456789") == std::string::npos) {
    if (name_or_gid.size() > 9) return Status::InvalidArgument("group id out of range");
    return static_cast<gid_t>(std::stoul(name_or_gid));
  }
  group entry{};
  group* found = nullptr;
  std::vector<char> buffer(16384);
  const int error = ::getgrnam_r(name_or_gid.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (error != 0) return Status::FromErrno(error, "getgrnam_r " + name_or_gid);
  if (found == nullptr) {
    return Status::NotFound("no group '" + name_or_gid +
                            "' (the gpuvm-host package creates 'gpuvm'; addgroup --system NAME)");
  }
  return found->gr_gid;
}

Status ShareSocketWithGroup(const std::string& path, gid_t group) {
  if (path.empty() || path[0] == '@') return Status::Ok();
  if (::chown(path.c_str(), static_cast<uid_t>(-1), group) != 0) {
    return Status::FromErrno(errno, "chown " + path + " to group " + std::to_string(group));
  }
  if (::chmod(path.c_str(), 0660) != 0) return Status::FromErrno(errno, "chmod 0660 " + path);
  return Status::Ok();
}

std::string DescribePeer(const PeerCredentials& peer) {
  return "uid " + std::to_string(peer.uid) + " (pid " + std::to_string(peer.pid) + ")";
}

void SendPartingMessage(int socket, std::span<const uint8_t> message) {
  (void)::send(socket, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  // A bounded number: a peer that keeps writing is not worth more of our time.
  for (int i = 0; i < 64; ++i) {
    Result<ReceivedMessage> discarded = ReceiveWithFds(socket, 1, true);
    if (!discarded.ok() && discarded.status().code() != StatusCode::kDataLoss) break;
  }
}

Result<ReceivedMessage> ReceivePartingMessage(int socket, size_t max_bytes) {
  // The first attempt may only collect the pending ECONNRESET (the kernel reports it once).
  Result<ReceivedMessage> m = ReceiveWithFds(socket, max_bytes, true);
  if (!m.ok() && m.status().code() == StatusCode::kUnavailable) {
    m = ReceiveWithFds(socket, max_bytes, true);
  }
  return m;
}

}  // namespace gpuvm::os
