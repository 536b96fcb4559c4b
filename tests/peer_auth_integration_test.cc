// Who may open a VM, end to end with real processes (docs/SECURITY.md): gpuvm-aggregator,
// gpuvm-vm + gpuvm-dm + a guest, gpuvm-ctl and gpuvm-local-hvd, attacked by what the host's other
// users and a rogue device model can do. Checked:
//  - another user (uid nobody, when the test runs as root; skipped otherwise) is refused on the VM
//    socket, the control socket and the hypervisor daemon's socket, and its client prints the
//    reason (PermissionDenied and the rule), not a broken pipe; gpuvm-vm run by it starts nothing;
//  - a device model without its VM's token is refused before anything is charged (no token, a
//    made-up one, an old protocol version, the real gpuvm-dm handed a wrong token);
//  - device models that squat (HELLO + VM_CONFIG, then silence) cannot take channels, and ones
//    that were admitted with a real token and went silent are dropped at the handshake deadline;
//  - 80 idle connections of our own user (and, as root, another user's connections re-opened as
//    fast as they are closed) lock out neither the operator (gpuvm-ctl list) nor admission (a real
//    VM starts and computes correctly);
//  - a VM that was running before each attack keeps running throughout;
//  - with --socket-group, the sockets are files of that group, mode 0660, and a member of the
//    group (primary or supplementary) may use them while another user is refused (by the file's
//    mode, and by the credential check were the file open to all).
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/os.h"
#include "hypervisor/local/hv_client.h"
#include "ipc/channel.h"
#include "qemu-device/ipc_aggregator_connection.h"
#include "tests/vm_process_fixture.h"

namespace {

using gpuvm::Result;
using gpuvm::Status;
using gpuvm::StatusCode;
using gpuvm::process_testing::Alive;
using gpuvm::process_testing::Clock;
using gpuvm::process_testing::Process;
namespace ipc = gpuvm::ipc;
using namespace std::chrono_literals;

// Another user to attack as: nobody, when we are root (CI is).
struct OtherUser {
  uid_t uid;
  gid_t gid;
};
std::optional<OtherUser> Nobody() {
  if (::geteuid() != 0) return std::nullopt;
  if (const passwd* pw = ::getpwnam("nobody")) return OtherUser{pw->pw_uid, pw->pw_gid};
  return OtherUser{65534, 65534};
}
#define SKIP_UNLESS_ROOT(who)                                                         \
  const std::optional<OtherUser> who = Nobody();                                      \
  if (!who)                                                                           \
  GTEST_SKIP() << "needs root, to run a client as another user (uid nobody) against " \
                  "our sockets"

// In a forked child: becomes `who` for good, with `groups` as its supplementary groups.
bool BecomeInChild(const OtherUser& who, const std::vector<gid_t>& groups = {}) {
  return ::setgroups(groups.size(), groups.data()) == 0 &&
         ::setresgid(who.gid, who.gid, who.gid) == 0 && ::setresuid(who.uid, who.uid, who.uid) == 0;
}

// Runs `body` in a child process as `who` (in `groups`); returns the text it produced.
std::string InChildAs(const OtherUser& who, const std::function<std::string()>& body,
                      const std::vector<gid_t>& groups = {}) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    const std::string out = BecomeInChild(who, groups) ? body() : "could not become the other user";
    (void)!::write(p[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buffer[4096];
  for (ssize_t n; (n = ::read(p[0], buffer, sizeof buffer)) > 0;) out.append(buffer, size_t(n));
  ::close(p[0]);
  ::waitpid(pid, nullptr, 0);
  return out;
}

// A program run as `who`, its output in files (opened before it drops root).
Process StartAs(const OtherUser& who, const std::vector<std::string>& argv,
                const std::string& log_prefix, const std::vector<gid_t>& groups = {}) {
  return Process::Start(argv, log_prefix, [&who, &groups] {
    if (!BecomeInChild(who, groups)) ::_exit(126);
  });
}

ipc::VmConfig FvConfig(uint16_t domid, const std::string& name) {
  ipc::VmConfig c;
  c.domid = domid;
  c.mode = ipc::VmMode::kFullVirtualization;
  c.vcpus = 1;
  c.guest_ram_bytes = 16ull << 20;
  c.bar0_size = 16ull << 20;
  c.bar1_size = 128ull << 20;
  c.bar3_size = 64ull << 20;
  c.name = name;
  return c;
}

// The next message from the aggregator, or (once it hung up) the one it left behind.
Result<ipc::Message> Next(ipc::Channel& c) {
  Result<ipc::Channel::Received> m = c.Receive(30'000);
  if (!m.ok() && m.status().code() == StatusCode::kUnavailable) m = c.ReceiveParting();
  if (!m.ok()) return m.status();
  return m->message;
}

// After an ERROR: the aggregator hung up.
bool HungUp(ipc::Channel& c) {
  return c.Receive(30'000).status().code() == StatusCode::kUnavailable;
}

// The next message is an ERROR whose text says `says`; its code, when given, is `code`.
void ExpectError(ipc::Channel& c, std::string_view says,
                 std::optional<StatusCode> code = std::nullopt) {
  Result<ipc::Message> m = Next(c);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto* e = std::get_if<ipc::Error>(&m->body);
  ASSERT_NE(e, nullptr) << ipc::MessageTypeName(ipc::TypeOf(m->body));
  if (code) {
    EXPECT_EQ(e->code, *code);
  }
  EXPECT_NE(e->text.find(says), std::string::npos) << e->text;
}

class PeerAuthTest : public gpuvm::process_testing::AggregatorProcessTest {
 protected:
  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--vram-mib", "512", "--compute-workers", "2"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    StartAggregator("peerauth", flags);
  }

  struct Ctl {
    int code;
    std::string out, err;
  };
  Ctl RunCtl(std::vector<std::string> args) {
    args.insert(args.begin(), {GPUVM_CTL_BIN, "--socket", socket_ + "-control"});
    Process c = Process::Start(args, dir_ + "/ctl" + std::to_string(ctl_runs_++));
    EXPECT_TRUE(c.Wait(60s)) << c.Logs();
    return {c.exit_code(), c.out(), c.err()};
  }
  ipc::VmToken Token(uint16_t domid) {
    Ctl c = RunCtl({"vm-token", std::to_string(domid)});
    EXPECT_EQ(c.code, 0) << c.err;
    Result<ipc::VmToken> t = ipc::ParseVmToken(c.out);
    EXPECT_TRUE(t.ok()) << t.status().ToString() << ": '" << c.out << "'";
    return t.ok() ? *t : ipc::VmToken{};
  }
  std::string List() {
    Ctl c = RunCtl({"list"});
    EXPECT_EQ(c.code, 0) << c.err;
    return c.out;
  }

  // An fv VM named `name` that keeps launching kernels until it is killed (it exits with an error
  // the moment its GPU fails it); returns once it has run one.
  Process StartHolder(const std::string& name) {
    const std::string ready = dir_ + "/" + name + ".ready";
    Process p =
        StartVm({"--mode", "fv-lazy", "--name", name, "--vram-mib", "64"}, {"hold", ready}, name);
    const auto deadline = Clock::now() + 120s;
    while (!std::filesystem::exists(ready) && Clock::now() < deadline && !p.Exited()) {
      std::this_thread::sleep_for(5ms);
    }
    EXPECT_TRUE(std::filesystem::exists(ready)) << p.Logs() << AggregatorLog();
    return p;
  }
  void ExpectStillRunningThenStop(Process& holder) {
    EXPECT_FALSE(holder.Exited()) << "the VM running before the attack died\n" << holder.Logs();
    ::kill(holder.pid, SIGTERM);
    holder.Wait(60s);
  }

  // A fresh VM, started now, computes correctly.
  void ExpectAVmRunsCorrectly(const std::string& name) {
    Process p =
        StartVm({"--mode", "fv-lazy", "--name", name, "--vram-mib", "64"}, {"case", "madd"}, name);
    ASSERT_TRUE(p.Wait(180s)) << p.Logs();
    EXPECT_EQ(p.exit_code(), 0) << p.Logs() << AggregatorLog();
    EXPECT_NE(p.out().find("PASSED madd"), std::string::npos) << p.Logs();
  }

  ipc::Channel Open() {
    Result<ipc::Channel> c = ipc::Channel::Connect(socket_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : ipc::Channel(gpuvm::os::UniqueFd());
  }

  int ctl_runs_ = 0;
};

TEST_F(PeerAuthTest, AnotherUsersDeviceModelIsRefusedOnTheVmSocket) {
  SKIP_UNLESS_ROOT(nobody);
  ASSERT_NO_FATAL_FAILURE(Start());
  // Even with a real token (which another user could not get: see the control socket test).
  const ipc::VmToken token = Token(9);
  const std::string socket = socket_;
  const std::string result = InChildAs(*nobody, [&] {
    gpuvm::dm::IpcConnectOptions o;
    o.path = socket;
    o.vm = FvConfig(9, "intruder");
    o.token = token;
    auto c = gpuvm::dm::IpcAggregatorConnection::Connect(o);
    return c.ok() ? std::string("admitted") : c.status().ToString();
  });
  EXPECT_NE(result.find("PermissionDenied"), std::string::npos) << result;
  EXPECT_NE(result.find("uid " + std::to_string(nobody->uid) + " may not connect"),
            std::string::npos)
      << result;
  EXPECT_EQ(List().find("intruder"), std::string::npos);
  EXPECT_NE(AggregatorLog().find("refused uid " + std::to_string(nobody->uid)), std::string::npos)
      << AggregatorLog();
}

TEST_F(PeerAuthTest, AnotherUserIsRefusedOnTheControlSocketAndCannotStartAVm) {
  SKIP_UNLESS_ROOT(nobody);
  ASSERT_NO_FATAL_FAILURE(Start());
  Process ctl = StartAs(*nobody, {GPUVM_CTL_BIN, "--socket", socket_ + "-control", "list"},
                        dir_ + "/nobody-ctl");
  ASSERT_TRUE(ctl.Wait(60s));
  EXPECT_EQ(ctl.exit_code(), 1) << ctl.Logs();
  EXPECT_NE(ctl.err().find("refused: PermissionDenied: uid " + std::to_string(nobody->uid) +
                           " may not control this aggregator"),
            std::string::npos)
      << ctl.Logs();
  // The commands that change a VM's work are refused alike (the peer is checked before any
  // request is read).
  for (const std::vector<std::string>& command : std::vector<std::vector<std::string>>{
           {"pause", "1"}, {"kill-work", "1"}, {"set-kernel-limit", "1", "1"}}) {
    std::vector<std::string> argv = {GPUVM_CTL_BIN, "--socket", socket_ + "-control"};
    argv.insert(argv.end(), command.begin(), command.end());
    Process refused = StartAs(*nobody, argv, dir_ + "/nobody-" + command[0]);
    ASSERT_TRUE(refused.Wait(60s));
    EXPECT_EQ(refused.exit_code(), 1) << refused.Logs();
    EXPECT_NE(refused.err().find("refused: PermissionDenied"), std::string::npos) << refused.Logs();
  }

  Process vm = StartAs(*nobody, VmCommand({"--mode", "fv-lazy", "--name", "intruder"}, {"nop"}),
                       dir_ + "/nobody-vm");
  ASSERT_TRUE(vm.Wait(60s)) << vm.Logs();
  EXPECT_NE(vm.exit_code(), 0) << vm.Logs();
  EXPECT_NE(vm.err().find("cannot get the VM's token"), std::string::npos) << vm.Logs();
  EXPECT_NE(vm.err().find("PermissionDenied"), std::string::npos) << vm.Logs();
  EXPECT_EQ(List().find("intruder"), std::string::npos);
  EXPECT_NE(
      AggregatorLog().find("level=warn component=gpuvm-aggregator.control msg=\"refused uid " +
                           std::to_string(nobody->uid)),
      std::string::npos)
      << AggregatorLog();
}

TEST_F(PeerAuthTest, AnotherUserIsRefusedByTheHypervisorDaemon) {
  SKIP_UNLESS_ROOT(nobody);
  dir_ = ::testing::TempDir() + "gpuvm-peerauth-hvd-" + std::to_string(::getpid());
  ::mkdir(dir_.c_str(), 0755);
  const std::string path = "@gpuvm-peerauth-hvd-" + std::to_string(::getpid());
  Process hvd = Process::Start({GPUVM_HVD_BIN, "--socket", path}, dir_ + "/hvd");
  const auto deadline = Clock::now() + 30s;
  while (Clock::now() < deadline && !hvd.Exited() &&
         hvd.err().find("serving") == std::string::npos) {
    std::this_thread::sleep_for(5ms);
  }
  const std::string result = InChildAs(*nobody, [&] {
    auto c = gpuvm::hv::local::LocalHvClient::Connect(path, 0);  // claiming to be dom0
    return c.ok() ? std::string("served") : c.status().ToString();
  });
  EXPECT_NE(result.find("PermissionDenied"), std::string::npos) << result;
  EXPECT_NE(result.find("uid " + std::to_string(nobody->uid) +
                        " may not use this local hypervisor daemon"),
            std::string::npos)
      << result;
  // Its own user still is.
  auto ours = gpuvm::hv::local::LocalHvClient::Connect(path, 0);
  EXPECT_TRUE(ours.ok()) << ours.status().ToString();
  ::kill(hvd.pid, SIGTERM);
  EXPECT_TRUE(hvd.Wait(30s)) << hvd.Logs();
  EXPECT_EQ(hvd.exit_code(), 0) << hvd.Logs();
  EXPECT_NE(hvd.err().find("refused uid " + std::to_string(nobody->uid)), std::string::npos)
      << hvd.Logs();
}

TEST_F(PeerAuthTest, ADeviceModelWithoutItsVmsTokenIsRefused) {
  ASSERT_NO_FATAL_FAILURE(Start());
  {  // No AUTH at all: straight to VM_CONFIG, as a device model before version 5 would.
    ipc::Channel c = Open();
    ASSERT_TRUE(
        c.Send({1, ipc::Hello{ipc::kProtocolVersion, ipc::kProtocolVersion, "rogue"}}).ok());
    ASSERT_TRUE(c.Send({2, FvConfig(30, "rogue")}).ok());
    Result<ipc::Message> ack = Next(c);
    ASSERT_TRUE(ack.ok() && std::holds_alternative<ipc::HelloAck>(ack->body));
    ASSERT_NO_FATAL_FAILURE(ExpectError(c, "VM_CONFIG before AUTH", StatusCode::kPermissionDenied));
    EXPECT_TRUE(HungUp(c));
  }
  {  // An old device model.
    ipc::Channel c = Open();
    ASSERT_TRUE(c.Send({1, ipc::Hello{1, 4, "gpuvm-dm"}}).ok());
    ASSERT_NO_FATAL_FAILURE(ExpectError(c, "upgrade gpuvm-dm"));
  }
  {  // Another domain's token.
    const ipc::VmToken token = Token(31);
    ipc::Channel c = Open();
    ASSERT_TRUE(
        c.Send({1, ipc::Hello{ipc::kProtocolVersion, ipc::kProtocolVersion, "rogue"}}).ok());
    ASSERT_TRUE(c.Send({2, ipc::Auth{token}}).ok());
    ASSERT_TRUE(c.Send({3, FvConfig(32, "rogue")}).ok());
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(Next(c).ok());
    ASSERT_NO_FATAL_FAILURE(ExpectError(c, "issued for domain 31, not 32"));
  }
  // The real gpuvm-dm, handed a wrong token instead of its VM's: the VM does not start, and the
  // reason is on gpuvm-vm's stderr (its device model's message).
  const std::string wrong = dir_ + "/wrong.token";
  std::ofstream(wrong) << ipc::FormatVmToken(ipc::VmToken{}) << "\n";
  const std::string dm = dir_ + "/dm-with-a-wrong-token";
  std::ofstream(dm) << "#!/bin/sh\nexec 4<" << wrong << "\nexec " << GPUVM_DM_BIN << " \"$@\"\n";
  ::chmod(dm.c_str(), 0755);
  std::vector<std::string> argv = VmCommand({"--mode", "fv-lazy", "--name", "rogue"}, {"nop"});
  argv[4] = dm;  // --dm
  Process vm = Process::Start(argv, dir_ + "/rogue");
  ASSERT_TRUE(vm.Wait(60s)) << vm.Logs();
  EXPECT_NE(vm.exit_code(), 0) << vm.Logs();
  EXPECT_NE(vm.err().find("PermissionDenied"), std::string::npos) << vm.Logs();
  EXPECT_NE(vm.err().find("the VM token is unknown, used or expired"), std::string::npos)
      << vm.Logs();
  EXPECT_EQ(List().find("rogue"), std::string::npos) << "nothing was admitted";
}

TEST_F(PeerAuthTest, SquattingDeviceModelsCannotHoldChannels) {
  ASSERT_NO_FATAL_FAILURE(Start({"--handshake-timeout-ms", "2000"}));
  Process victim = StartHolder("victim");
  // Eight device models announce fv VMs of 16 channels each — every channel of the GPU — and go
  // silent: without their VMs' tokens they are refused on the spot, and hold nothing.
  std::vector<ipc::Channel> squatters;
  for (uint16_t i = 0; i < 8; ++i) {
    squatters.push_back(Open());
    ASSERT_TRUE(squatters.back()
                    .Send({1, ipc::Hello{ipc::kProtocolVersion, ipc::kProtocolVersion, "squatter"}})
                    .ok());
    ASSERT_TRUE(squatters.back().Send({2, FvConfig(40 + i, "squat" + std::to_string(i))}).ok());
  }
  for (ipc::Channel& c : squatters) {
    ASSERT_TRUE(Next(c).ok());  // HELLO_ACK
    Result<ipc::Message> m = Next(c);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    ASSERT_TRUE(std::holds_alternative<ipc::Error>(m->body));
    EXPECT_TRUE(HungUp(c));
  }
  std::string list = List();
  EXPECT_NE(list.find("victim"), std::string::npos) << list;
  EXPECT_EQ(list.find("squat"), std::string::npos) << list;
  ASSERT_NO_FATAL_FAILURE(ExpectAVmRunsCorrectly("meanwhile"));

  // Seven admitted with real tokens (the launcher's, say, of device models that were then
  // subverted) that go silent before their guest memory: they hold the rest of the channels only
  // until the handshake deadline, are told so, and are gone.
  squatters.clear();
  std::vector<ipc::VmToken> tokens;
  for (uint16_t i = 0; i < 7; ++i) tokens.push_back(Token(50 + i));
  for (uint16_t i = 0; i < 7; ++i) {
    squatters.push_back(Open());
    ipc::Channel& c = squatters.back();
    ASSERT_TRUE(
        c.Send({1, ipc::Hello{ipc::kProtocolVersion, ipc::kProtocolVersion, "squatter"}}).ok());
    ASSERT_TRUE(c.Send({2, ipc::Auth{tokens[i]}}).ok());
    ASSERT_TRUE(c.Send({3, FvConfig(50 + i, "held" + std::to_string(i))}).ok());
    for (int reply = 0; reply < 2; ++reply) ASSERT_TRUE(Next(c).ok());
    Result<ipc::Message> accept = Next(c);
    ASSERT_TRUE(accept.ok());
    ASSERT_TRUE(std::holds_alternative<ipc::VmAccept>(accept->body))
        << ipc::MessageTypeName(ipc::TypeOf(accept->body));
  }
  for (ipc::Channel& c : squatters) {
    ASSERT_NO_FATAL_FAILURE(ExpectError(c, "no handshake", StatusCode::kDeadlineExceeded));
    EXPECT_TRUE(HungUp(c));
  }
  list = List();
  EXPECT_EQ(list.find("held"), std::string::npos) << list;
  ASSERT_NO_FATAL_FAILURE(ExpectAVmRunsCorrectly("after"));
  ExpectStillRunningThenStop(victim);
}

TEST_F(PeerAuthTest, IdleConnectionsLockOutNeitherTheOperatorNorAdmission) {
  ASSERT_NO_FATAL_FAILURE(Start());  // the default 5 s handshake deadline
  Process victim = StartHolder("victim");
  // Another user's connections, re-opened as soon as they are closed, for as long as we run.
  struct KillOnExit {
    pid_t pid = -1;
    ~KillOnExit() {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } flood_guard;
  pid_t& flood = flood_guard.pid;
  if (const std::optional<OtherUser> nobody = Nobody()) {
    const std::string vm_socket = socket_, control_socket = socket_ + "-control";
    flood = ::fork();
    if (flood == 0) {
      if (!BecomeInChild(*nobody)) ::_exit(1);
      std::vector<gpuvm::os::UniqueFd> held(80);
      for (;;) {
        for (size_t i = 0; i < held.size(); ++i) {
          pollfd pfd{held[i].get(), POLLIN, 0};
          if (held[i].valid() && ::poll(&pfd, 1, 0) == 0) continue;  // still open and silent
          auto c = gpuvm::os::ConnectSeqpacket(i < 64 ? vm_socket : control_socket);
          held[i] = c.ok() ? std::move(*c) : gpuvm::os::UniqueFd();
        }
        ::usleep(50'000);
      }
    }
  }
  // Our own user's: 80 on the VM socket, 40 on the control socket, all silent.
  std::vector<gpuvm::os::UniqueFd> idle;
  for (int i = 0; i < 120; ++i) {
    auto c = gpuvm::os::ConnectSeqpacket(i < 80 ? socket_ : socket_ + "-control");
    ASSERT_TRUE(c.ok()) << i << ": " << c.status().ToString();
    idle.push_back(std::move(*c));
  }
  std::this_thread::sleep_for(200ms);  // let the aggregator take them all in

  Ctl list = RunCtl({"list"});
  EXPECT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("victim"), std::string::npos) << list.out << list.err;
  ASSERT_NO_FATAL_FAILURE(ExpectAVmRunsCorrectly("admitted"));
  ExpectStillRunningThenStop(victim);
}

// The operator group (docs/SECURITY.md): --socket-group with filesystem sockets.
TEST_F(PeerAuthTest, TheSocketGroupsMembersOperateAndOthersAreRefused) {
  // The group: our own primary one (the operator is in the group, as in gpuvm on a host).
  const gid_t group = ::getegid();
  const ::group* entry = ::getgrgid(group);
  const std::string name = entry != nullptr ? entry->gr_name : std::to_string(group);
  ASSERT_NO_FATAL_FAILURE(StartAggregator("peerauth", {"--vram-mib", "256", "--socket-group", name},
                                          "aggregator.socket"));
  const std::string control = socket_ + "-control";
  for (const std::string& path : {socket_, control}) {
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_TRUE(S_ISSOCK(st.st_mode)) << path;
    EXPECT_EQ(st.st_mode & 07777, 0660u) << path;
    EXPECT_EQ(st.st_gid, group) << path;
  }
  EXPECT_NE(List().find("ID"), std::string::npos);  // the aggregator's own user still may

  SKIP_UNLESS_ROOT(nobody);
  // Members: nobody with the group among its supplementary groups, and with it as its primary one.
  for (const bool primary : {false, true}) {
    OtherUser member = *nobody;
    std::vector<gid_t> groups = {group};
    if (primary) {
      member.gid = group;
      groups.clear();
    }
    Process ctl = StartAs(member, {GPUVM_CTL_BIN, "--socket", control, "list"},
                          dir_ + "/member-ctl" + std::to_string(primary), groups);
    ASSERT_TRUE(ctl.Wait(60s));
    EXPECT_EQ(ctl.exit_code(), 0) << "primary " << primary << ": " << ctl.Logs();
    EXPECT_NE(ctl.out().find("ID"), std::string::npos) << ctl.Logs();
    // A member's device model passes the credential check (with a token it got as an operator).
    const uint16_t domid = primary ? 21 : 22;
    const ipc::VmToken token = Token(domid);
    const std::string socket = socket_;
    const std::string admitted = InChildAs(
        member,
        [&] {
          gpuvm::dm::IpcConnectOptions o;
          o.path = socket;
          o.vm = FvConfig(domid, "member");
          o.token = token;
          auto c = gpuvm::dm::IpcAggregatorConnection::Connect(o);
          return c.ok() ? std::string("admitted") : c.status().ToString();
        },
        groups);
    EXPECT_EQ(admitted, "admitted");
  }

  // Not a member: the sockets' mode keeps it out...
  Process outsider =
      StartAs(*nobody, {GPUVM_CTL_BIN, "--socket", control, "list"}, dir_ + "/outsider-ctl");
  ASSERT_TRUE(outsider.Wait(60s));
  EXPECT_NE(outsider.exit_code(), 0) << outsider.Logs();  // (3: it could not connect)
  EXPECT_NE(outsider.err().find("Permission denied"), std::string::npos) << outsider.Logs();
  // ...and were they open to everyone, the credential check would still refuse it.
  ASSERT_EQ(::chmod(control.c_str(), 0666), 0);
  ASSERT_EQ(::chmod(socket_.c_str(), 0666), 0);
  Process refused =
      StartAs(*nobody, {GPUVM_CTL_BIN, "--socket", control, "list"}, dir_ + "/refused-ctl");
  ASSERT_TRUE(refused.Wait(60s));
  EXPECT_EQ(refused.exit_code(), 1) << refused.Logs();
  EXPECT_NE(refused.err().find("refused: PermissionDenied: uid " + std::to_string(nobody->uid) +
                               " may not control this aggregator: only its user (uid " +
                               std::to_string(::geteuid()) + "), members of group " +
                               std::to_string(group) + " or root may"),
            std::string::npos)
      << refused.Logs();
  const ipc::VmToken token = Token(23);
  const std::string socket = socket_;
  const std::string result = InChildAs(*nobody, [&] {
    gpuvm::dm::IpcConnectOptions o;
    o.path = socket;
    o.vm = FvConfig(23, "outsider");
    o.token = token;
    auto c = gpuvm::dm::IpcAggregatorConnection::Connect(o);
    return c.ok() ? std::string("admitted") : c.status().ToString();
  });
  EXPECT_NE(result.find("uid " + std::to_string(nobody->uid) + " may not connect"),
            std::string::npos)
      << result;
}

}  // namespace
