#include "aggregator/session.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace gpuvm::aggregator {
namespace {

gpu::Bar ToGpu(ipc::Bar bar) { return static_cast<gpu::Bar>(static_cast<uint8_t>(bar)); }
size_t Slot(ipc::Bar bar) { return bar == ipc::Bar::kBar0 ? 0 : bar == ipc::Bar::kBar1 ? 1 : 2; }

ipc::Error ToError(const Status& status) {
  ipc::Error e;
  e.code = status.ok() ? StatusCode::kInternal : status.code();
  // The wire takes printable ASCII up to kMaxErrorText: anything else becomes '?'.
  for (char c : status.message()) {
    if (e.text.size() == ipc::kMaxErrorText) break;
    e.text.push_back(c >= 0x20 && c <= 0x7e ? c : '?');
  }
  return e;
}

// The lane's doorbells must be eventfds we can signal without ever blocking: a device model could
// pass a pipe nobody drains, or an eventfd whose counter it pushed to the brim, and our next
// doorbell write would hang the aggregator for every VM. O_NONBLOCK is shared with the sender's
// descriptor, which is harmless (both sides only write doorbells and wait with epoll).
Status CheckDoorbell(int fd) {
  char target[64] = {};
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof(target) - 1);
  if (n <= 0 || std::string(target, static_cast<size_t>(n)) != "anon_inode:[eventfd]") {
    return Status::InvalidArgument("a fast lane doorbell is not an eventfd");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, "making a doorbell non-blocking");
  }
  return Status::Ok();
}

}  // namespace

Session::~Session() {
  if (state_ != State::kClosed) Close("session destroyed");
}

void Session::Close(std::string reason) {
  if (state_ == State::kClosed) return;
  state_ = State::kClosed;
  close_reason_ = std::move(reason);
  lane_.reset();
  if (vm_ != nullptr) {
    summary_ = {true,
                vm_->Describe(),
                vm_->LogFields(),
                vm_->counters,
                vm_->vgpu->DescribeCounters(),
                vm_->refusals()};
    teardown_status_ = aggregator_->RemoveVm(vm_->id);
    vm_ = nullptr;
  }
}

void Session::Fail(Output& out, uint32_t seq, const Status& status, bool fatal) {
  out.send.push_back(ipc::Message{fatal ? 0u : seq, ToError(status)});
  out.close = true;
  Close(status.ToString());
}

Session::Output Session::OnMessage(const ipc::Message& m, std::vector<os::UniqueFd> fds) {
  Output out;
  if (state_ == State::kClosed) {
    out.close = true;
    return out;
  }
  const auto reply = [&](ipc::Body body) {
    out.send.push_back(ipc::Message{m.seq, std::move(body)});
  };
  const std::string type(ipc::MessageTypeName(ipc::TypeOf(m.body)));
  const auto out_of_turn = [&] {
    Fail(out, m.seq,
         Status::FailedPrecondition(type + " out of turn (session state " +
                                    std::to_string(static_cast<int>(state_)) + ")"),
         false);
  };

  // Messages valid in every state.
  if (const auto* ping = std::get_if<ipc::Ping>(&m.body)) {
    reply(ipc::Pong{ping->nonce});
    return out;
  }
  if (std::holds_alternative<ipc::Teardown>(m.body)) {
    // The device model withdrew its BAR remap ranges before saying so (docs/IPC.md).
    if (vm_ != nullptr) aggregator_->NoteCleanTeardown(vm_->id);
    reply(ipc::TeardownAck{});
    out.close = true;
    Close("the device model ended the session");
    return out;
  }
  // Answers to our BAR_MAP/BAR_UNMAP requests (in the order we sent them).
  if ((std::holds_alternative<ipc::BarMapAck>(m.body) ||
       std::holds_alternative<ipc::Error>(m.body)) &&
      m.seq != 0 && !bar_requests_.empty() && bar_requests_.front().first == m.seq) {
    const bool map = bar_requests_.front().second;
    bar_requests_.pop_front();
    Status answer;
    if (const auto* error = std::get_if<ipc::Error>(&m.body))
      answer = Status(error->code, error->text);
    if (state_ == State::kActive) vm_->vgpu->BarRemapAnswered(map, answer);
    return out;
  }
  if (const auto* error = std::get_if<ipc::Error>(&m.body)) {
    // An error that answers nothing of ours: either way the device model is done.
    out.close = true;
    Close("the device model sent ERROR: " + Status(error->code, error->text).ToString());
    return out;
  }

  switch (state_) {
    case State::kAwaitHello: {
      const auto* hello = std::get_if<ipc::Hello>(&m.body);
      if (hello == nullptr) break;
      // The highest version both speak.
      const uint16_t version = std::min(hello->max_version, ipc::kProtocolVersion);
      if (version < hello->min_version || version < ipc::kMinProtocolVersion) {
        Fail(
            out, m.seq,
            Status::FailedPrecondition(
                "no common protocol version: we speak " + std::to_string(ipc::kMinProtocolVersion) +
                ".." + std::to_string(ipc::kProtocolVersion) + ", offered " +
                std::to_string(hello->min_version) + ".." + std::to_string(hello->max_version) +
                (hello->max_version < ipc::kAuthProtocolVersion
                     ? " (version 5 authenticates device models with their VM's token: "
                       "upgrade gpuvm-dm)"
                 : hello->max_version < ipc::kTypedConfigProtocolVersion
                     ? " (version 6 carries a VM's mode, VRAM, channels and share as typed "
                       "fields, no longer in its name: upgrade gpuvm-dm)"
                     : "")),
            false);
        return out;
      }
      version_ = version;
      reply(ipc::HelloAck{version});
      state_ = State::kAwaitAuth;
      return out;
    }
    case State::kAwaitAuth: {
      const auto* auth = std::get_if<ipc::Auth>(&m.body);
      if (auth == nullptr) {
        Fail(out, m.seq,
             Status::PermissionDenied(type + " before AUTH: a device model presents its VM's token "
                                             "first (docs/SECURITY.md)"),
             false);
        return out;
      }
      Result<uint16_t> domid = aggregator_->vm_tokens().Redeem(auth->token);
      if (!domid.ok()) {
        Fail(out, m.seq, domid.status(), false);
        return out;
      }
      domid_ = *domid;
      reply(ipc::AuthAck{});
      state_ = State::kAwaitConfig;
      return out;
    }
    case State::kAwaitConfig: {
      const auto* config = std::get_if<ipc::VmConfig>(&m.body);
      if (config == nullptr) break;
      if (config->domid != domid_) {
        Fail(out, m.seq,
             Status::PermissionDenied("the VM token was issued for domain " +
                                      std::to_string(domid_) + ", not " +
                                      std::to_string(config->domid)),
             false);
        return out;
      }
      Result<VmControlBlock*> vm = aggregator_->AdmitVm(*config);
      if (!vm.ok()) {
        Fail(out, m.seq, vm.status(), false);
        return out;
      }
      vm_ = *vm;
      state_ = State::kActive;
      reply(ipc::VmAccept{vm_->id, ipc::kAcceptWantsGuestMemory | ipc::kAcceptFastLane,
                          vm_->vgpu->vram_bytes()});
      return out;
    }
    case State::kActive: {
      if (const auto* memory = std::get_if<ipc::GuestMemory>(&m.body)) {
        Status s = aggregator_->AttachGuestMemory(*vm_, *memory, std::move(fds));
        if (!s.ok()) {
          Fail(out, m.seq, s.WithContext("GUEST_MEMORY"), false);
          return out;
        }
        guest_memory_ = true;
        reply(ipc::GuestMemoryAck{});
        return out;
      }
      if (std::holds_alternative<ipc::FastLaneOffer>(m.body)) {
        if (lane_ != nullptr) {
          Fail(out, m.seq, Status::AlreadyExists("a second FAST_LANE"), false);
          return out;
        }
        Status doorbells = fds.size() == 3 ? CheckDoorbell(fds[1].get()) : Status::Ok();
        if (doorbells.ok() && fds.size() == 3) doorbells = CheckDoorbell(fds[2].get());
        if (!doorbells.ok()) {
          Fail(out, m.seq, doorbells.WithContext("FAST_LANE"), false);
          return out;
        }
        Result<std::unique_ptr<ipc::FastLane>> lane = ipc::FastLane::Adopt(std::move(fds));
        if (!lane.ok()) {
          Fail(out, m.seq, lane.status().WithContext("FAST_LANE"), false);
          return out;
        }
        lane_ = std::move(*lane);
        out.lane_opened = true;
        reply(ipc::FastLaneAck{});
        return out;
      }
      if (IsMmio(m.body)) {
        Result<ipc::Body> answer = Mmio(m.body);
        if (answer.ok()) {
          reply(std::move(*answer));
        } else {
          reply(ToError(answer.status()));  // refused access: the session goes on
        }
        return out;
      }
      break;
    }
    case State::kClosed:
      break;
  }

  // Requests of the device model, but out of turn.
  if (std::holds_alternative<ipc::Hello>(m.body) || std::holds_alternative<ipc::Auth>(m.body) ||
      std::holds_alternative<ipc::VmConfig>(m.body) ||
      std::holds_alternative<ipc::GuestMemory>(m.body) ||
      std::holds_alternative<ipc::FastLaneOffer>(m.body) ||
      std::holds_alternative<ipc::MmioRead>(m.body) ||
      std::holds_alternative<ipc::MmioWrite>(m.body) ||
      std::holds_alternative<ipc::MmioWriteBlock>(m.body) ||
      std::holds_alternative<ipc::MmioReadBlock>(m.body) ||
      std::holds_alternative<ipc::MmioWriteFill>(m.body)) {
    out_of_turn();
    return out;
  }
  // What only the aggregator sends, or replies to requests we never made.
  Fail(out, 0, Status::FailedPrecondition("unexpected " + type + " from the device model"), true);
  return out;
}

bool Session::IsMmio(const ipc::Body& body) const {
  // Every session speaks version 5 or later, which has blocks (2) and fills (4).
  return std::holds_alternative<ipc::MmioRead>(body) ||
         std::holds_alternative<ipc::MmioWrite>(body) ||
         std::holds_alternative<ipc::MmioWriteFill>(body) ||
         std::holds_alternative<ipc::MmioWriteBlock>(body) ||
         std::holds_alternative<ipc::MmioReadBlock>(body);
}

Result<ipc::Body> Session::Mmio(const ipc::Body& request) {
  Result<ipc::Body> answer = MmioAccess(request);
  if (!answer.ok()) ++vm_->counters.refused;  // every refusal of an access counts
  return answer;
}

Status Session::CheckVcpu(uint32_t vcpu) const {
  if (vcpu >= vm_->config.vcpus) return Status::InvalidArgument("no vCPU " + std::to_string(vcpu));
  return Status::Ok();
}

Result<ipc::Body> Session::MmioAccess(const ipc::Body& request) {
  VmCounters& counters = vm_->counters;
  if (const auto* block = std::get_if<ipc::MmioWriteBlock>(&request)) {
    GPUVM_RETURN_IF_ERROR(CheckVcpu(block->vcpu));
    GPUVM_RETURN_IF_ERROR(vm_->vgpu->WriteElements(ToGpu(block->bar), block->offset, block->size,
                                                   block->data, block->vcpu));
    counters.writes[Slot(block->bar)] += block->count;
    return ipc::Body(ipc::MmioWriteAck{});
  }
  if (const auto* fill = std::get_if<ipc::MmioWriteFill>(&request)) {
    GPUVM_RETURN_IF_ERROR(CheckVcpu(fill->vcpu));
    GPUVM_RETURN_IF_ERROR(vm_->vgpu->FillElements(ToGpu(fill->bar), fill->offset, fill->size,
                                                  fill->value, fill->count, fill->vcpu));
    counters.writes[Slot(fill->bar)] += fill->count;
    return ipc::Body(ipc::MmioWriteAck{});
  }
  if (const auto* block = std::get_if<ipc::MmioReadBlock>(&request)) {
    GPUVM_RETURN_IF_ERROR(CheckVcpu(block->vcpu));
    ipc::MmioReadBlockReply reply;
    reply.data.resize(size_t{block->count} * block->size);
    GPUVM_RETURN_IF_ERROR(vm_->vgpu->ReadElements(ToGpu(block->bar), block->offset, block->size,
                                                  reply.data, block->vcpu));
    counters.reads[Slot(block->bar)] += block->count;
    return ipc::Body(std::move(reply));
  }
  if (const auto* read = std::get_if<ipc::MmioRead>(&request)) {
    GPUVM_RETURN_IF_ERROR(CheckVcpu(read->vcpu));
    GPUVM_ASSIGN_OR_RETURN(uint64_t value,
                           vm_->vgpu->Read(ToGpu(read->bar), read->offset, read->size, read->vcpu));
    ++counters.reads[Slot(read->bar)];
    return ipc::Body(ipc::MmioReadReply{value});
  }
  const auto& write = std::get<ipc::MmioWrite>(request);
  GPUVM_RETURN_IF_ERROR(CheckVcpu(write.vcpu));
  GPUVM_RETURN_IF_ERROR(
      vm_->vgpu->Write(ToGpu(write.bar), write.offset, write.size, write.value, write.vcpu));
  ++counters.writes[Slot(write.bar)];
  return ipc::Body(ipc::MmioWriteAck{});
}

Result<ipc::Message> Session::OnLaneMessage(const ipc::Message& m) {
  if (state_ != State::kActive) return Status::FailedPrecondition("the session is not active");
  if (!IsMmio(m.body)) {
    return Status::DataLoss(std::string("the fast lane carried ") +
                            std::string(ipc::MessageTypeName(ipc::TypeOf(m.body))));
  }
  Result<ipc::Body> answer = Mmio(m.body);
  if (!answer.ok()) return ipc::Message{m.seq, ToError(answer.status())};
  return ipc::Message{m.seq, std::move(*answer)};
}

std::vector<Session::Request> Session::TakeBarRequests() {
  std::vector<Request> out;
  if (state_ != State::kActive) return out;
  for (const BarRemapRequest& r : vm_->vgpu->TakeBarRemapRequests()) {
    const uint32_t seq = next_seq_++;
    if (next_seq_ == 0) next_seq_ = 1;
    const auto bar = static_cast<ipc::Bar>(static_cast<uint8_t>(r.bar));
    if (r.map) {
      out.push_back(
          {ipc::Message{seq, ipc::BarMap{bar, r.offset, r.length, r.backing_offset}}, r.fd});
    } else {
      out.push_back({ipc::Message{seq, ipc::BarUnmap{bar, r.offset, r.length}}, -1});
    }
    bar_requests_.emplace_back(seq, r.map);
  }
  return out;
}

std::optional<ipc::Message> Session::InterruptUpdate() {
  if (state_ != State::kActive) return std::nullopt;
  const bool level = vm_->vgpu->interrupt_asserted();
  if (level == interrupt_sent_) return std::nullopt;
  interrupt_sent_ = level;
  ++vm_->counters.interrupts;
  return ipc::Message{0, ipc::Interrupt{level}};
}

ipc::Message Session::Teardown(ipc::TeardownReason reason) {
  const uint32_t seq = next_seq_++;
  Close("the aggregator ended the session");
  return ipc::Message{seq, ipc::Teardown{reason}};
}

}  // namespace gpuvm::aggregator
