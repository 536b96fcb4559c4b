#include "qemu-device/device_model.h"

#include <sys/epoll.h>

#include <cerrno>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "pv/protocol.h"

namespace gpuvm::dm {
namespace {

bool ValidMmioSize(uint32_t size) { return size == 1 || size == 2 || size == 4 || size == 8; }

uint64_t Mask(uint32_t size) { return size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1; }

// What a refused read returns: all-ones of the access size (all 64 bits when the size is nonsense;
// the guest only looks at its own width).
uint64_t AllOnes(uint32_t size) { return ValidMmioSize(size) ? Mask(size) : ~uint64_t{0}; }

// Element i of a rep access starting at `base`, walking up (or down when df). nullopt on
// wrap-around.
std::optional<uint64_t> Element(uint64_t base, uint64_t i, uint32_t size, bool df) {
  const uint64_t step = i * size;  // i < 4096, size <= 8: no overflow
  if (df) {
    if (base < step) return std::nullopt;
    return base - step;
  }
  if (base > ~uint64_t{0} - step) return std::nullopt;
  return base + step;
}

}  // namespace

DeviceModel::DeviceModel(const DeviceModelConfig& config, hv::IoreqServer* server,
                         AggregatorConnection* aggregator, hv::GuestMemory* guest_memory)
    : settings_(config),
      server_(server),
      aggregator_(aggregator),
      guest_memory_(guest_memory),
      config_(config.layout),
      busy_poll_(config.busy_poll) {}

Result<std::unique_ptr<DeviceModel>> DeviceModel::Create(const DeviceModelConfig& config,
                                                         hv::IoreqServer* server,
                                                         AggregatorConnection* aggregator,
                                                         hv::GuestMemory* guest_memory) {
  if (server == nullptr || aggregator == nullptr) {
    return Status::InvalidArgument("a device model needs an IOREQ server and an aggregator");
  }
  for (BarIndex bar : kBars) {
    const uint64_t size = config.layout.size(bar);
    if (size < hv::kPageSize || (size & (size - 1)) != 0 || size > (uint64_t{1} << 40)) {
      return Status::InvalidArgument(std::string(BarName(bar)) +
                                     " size must be a power of two from 4 KiB to 1 TiB");
    }
  }
  if (config.layout.bar0_size > (uint64_t{1} << 31)) {
    return Status::InvalidArgument("BAR0 is a 32-bit BAR: at most 2 GiB");
  }
  if (config.max_rep_bytes == 0 || config.max_rep_bytes > 65536) {
    return Status::InvalidArgument("max_rep_bytes out of range");
  }
  if (config.max_fill_count == 0 || config.max_fill_count > 65536) {
    return Status::InvalidArgument("max_fill_count out of range");
  }
  std::unique_ptr<DeviceModel> dm(new DeviceModel(config, server, aggregator, guest_memory));
  dm->wait_ = os::UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!dm->wait_.valid()) return Status::FromErrno(errno, "epoll_create1");
  const uint32_t server_events = server->UseEdgeTriggeredWait() ? EPOLLIN | EPOLLET : EPOLLIN;
  for (auto [fd, events, tag] :
       {std::tuple{server->wait_fd(), server_events, kServerTag},
        std::tuple{aggregator->event_fd(), uint32_t{EPOLLIN}, kAggregatorTag},
        std::tuple{server->housekeeping_fd(), uint32_t{EPOLLIN}, kHousekeepingTag}}) {
    if (fd < 0) continue;  // an in-process aggregator has nothing to wait for
    epoll_event ev{};
    ev.events = events;
    ev.data.u32 = tag;
    if (::epoll_ctl(dm->wait_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Status::FromErrno(errno, "epoll_ctl (device model wait set)");
    }
  }
  GPUVM_RETURN_IF_ERROR(server->MapPciDevice(config.sbdf));
  return dm;
}

DeviceModel::~DeviceModel() {
  SettlePosted();  // the last write is performed (or refused) before the device goes
  for (size_t i = 0; i < remaps_.size(); ++i) DropRemaps(i);
  for (auto& range : mapped_) {
    if (range) (void)server_->UnmapMmioRange(range->first, range->second);
  }
  if (intx_output_) (void)server_->SetPciIntxLevel(settings_.sbdf, 0, false);
  (void)server_->UnmapPciDevice(settings_.sbdf);
}

uint64_t DeviceModel::Refuse(Refusal reason, uint32_t size) {
  counters_.CountRefusal(reason);
  return AllOnes(size);
}

void DeviceModel::SendPostedWrite() {
  if (!unsent_post_) return;
  const PostedWrite w = *unsent_post_;
  unsent_post_.reset();
  if (!aggregator_->PostWrite(w.bar, w.offset, w.size, w.value, w.vcpu).ok()) {
    // Not sent (the connection broke): nothing to wait for; the guest's write is lost, as a write
    // to a device that fell off the bus.
    write_posted_ = false;
    counters_.CountRefusal(Refusal::kAggregatorError);
  }
}

void DeviceModel::SettlePosted() {
  SendPostedWrite();
  if (!write_posted_) return;
  write_posted_ = false;
  if (!aggregator_->Settle().ok()) counters_.CountRefusal(Refusal::kAggregatorError);
}

uint64_t DeviceModel::Handle(const hv::IoRequest& r) {
  // Nothing the guest does next overtakes a posted write: whatever this access is (a read of the
  // register just written, a configuration access that moves the BAR), the aggregator has
  // performed the write first.
  SettlePosted();
  switch (r.space) {
    case hv::IoSpace::kTimeOffset:
    case hv::IoSpace::kInvalidate:
      counters_.CountHousekeeping();  // nothing of ours is cached or timed
      return 0;
    case hv::IoSpace::kPciConfig:
      return HandleConfig(r);
    case hv::IoSpace::kMmio:
      ++mmio_exits_;
      return HandleMmio(r);
    case hv::IoSpace::kPort:
    case hv::IoSpace::kUnknown:
      break;
  }
  return Refuse(Refusal::kUnknownSpace, r.size);
}

uint64_t DeviceModel::HandleConfig(const hv::IoRequest& r) {
  if (r.sbdf != settings_.sbdf) return Refuse(Refusal::kWrongDevice, r.size);
  if (r.buffered && r.dir == hv::IoDirection::kRead) return Refuse(Refusal::kBufferedRead, r.size);
  if (r.count != 1 || r.data_is_ptr) return Refuse(Refusal::kBadRepetition, r.size);
  if (r.size != 1 && r.size != 2 && r.size != 4) return Refuse(Refusal::kBadSize, r.size);
  if (r.addr >= kConfigSpaceSize) return Refuse(Refusal::kOutsideConfig, r.size);
  if (!PciConfigSpace::ValidAccess(r.addr, r.size)) return Refuse(Refusal::kUnaligned, r.size);
  const uint32_t offset = static_cast<uint32_t>(r.addr);
  if (r.dir == hv::IoDirection::kRead) {
    counters_.CountConfigRead();
    return config_.Read(offset, r.size);
  }
  counters_.CountConfigWrite();
  config_.Write(offset, r.size, static_cast<uint32_t>(r.data & Mask(r.size)));
  SyncBarMappings();
  SyncInterrupt(false);  // the guest may have flipped INTx-disable or enabled MSI
  return 0;
}

uint64_t DeviceModel::HandleMmio(const hv::IoRequest& r) {
  if (r.buffered && r.dir == hv::IoDirection::kRead) return Refuse(Refusal::kBufferedRead, r.size);
  if (!ValidMmioSize(r.size)) return Refuse(Refusal::kBadSize, r.size);
  if (r.count == 0) return Refuse(Refusal::kBadRepetition, r.size);
  const bool read = r.dir == hv::IoDirection::kRead;
  const uint64_t total = uint64_t{r.count} * r.size;

  if (!r.data_is_ptr) {
    if (r.count == 1) {
      if (read) return ForwardRead(r.addr, r.size, r.vcpu).value_or(AllOnes(r.size));
      ForwardWrite(r.addr, r.size, r.data & Mask(r.size), r.vcpu, /*may_post=*/true);
      return 0;
    }
    // rep stos: the same value stored count times. A rep read needs a buffer (data_is_ptr).
    if (read || r.count > settings_.max_fill_count) return Refuse(Refusal::kBadRepetition, r.size);
    if (!r.df) return HandleFill(r);
    if (total > settings_.max_rep_bytes) return Refuse(Refusal::kBadRepetition, r.size);
    for (uint64_t i = 0; i < r.count; ++i) {
      const std::optional<uint64_t> gpa = Element(r.addr, i, r.size, r.df);
      if (!gpa) return Refuse(Refusal::kOutsideBars, r.size);
      if (!ForwardWrite(*gpa, r.size, r.data & Mask(r.size), r.vcpu)) break;
    }
    return 0;
  }

  // rep movs/ins/outs: data is the guest physical address of a count * size buffer.
  if (guest_memory_ == nullptr) return Refuse(Refusal::kBadPointer, r.size);
  if (total > settings_.max_rep_bytes) return Refuse(Refusal::kBadRepetition, r.size);
  const std::optional<uint64_t> last = Element(r.data, r.count - 1, r.size, r.df);
  if (!last) return Refuse(Refusal::kBadPointer, r.size);
  const uint64_t buffer_low = r.df ? *last : r.data;
  const uint64_t memory_bytes = guest_memory_->frame_count() << hv::kPageShift;
  if (buffer_low >= memory_bytes || total > memory_bytes - buffer_low) {
    return Refuse(Refusal::kBadPointer, r.size);
  }
  // Upwards (the usual case): consecutive elements go to the aggregator as runs, which a connection
  // may move in few messages (docs/IPC.md, version 2).
  if (!r.df) return HandleRepRun(r, read, total);
  for (uint64_t i = 0; i < r.count; ++i) {
    const std::optional<uint64_t> gpa = Element(r.addr, i, r.size, r.df);
    const uint64_t buffer = *Element(r.data, i, r.size, r.df);  // inside the checked buffer
    uint8_t bytes[8];
    if (read) {
      // A failed element reads all-ones, and so does the rest of the transfer.
      std::optional<uint64_t> value;
      if (gpa) {
        value = ForwardRead(*gpa, r.size, r.vcpu);
      } else {
        counters_.CountRefusal(Refusal::kOutsideBars);
      }
      const uint64_t v = value.value_or(AllOnes(r.size));
      std::memcpy(bytes, &v, r.size);
      if (!guest_memory_->Write(buffer, {bytes, r.size}).ok()) {
        return Refuse(Refusal::kBadPointer, r.size);
      }
      if (!value) {
        for (uint64_t j = i + 1; j < r.count; ++j) {
          std::memset(bytes, 0xff, sizeof(bytes));
          (void)guest_memory_->Write(*Element(r.data, j, r.size, r.df), {bytes, r.size});
        }
        break;
      }
    } else {
      if (!gpa) return Refuse(Refusal::kOutsideBars, r.size);
      if (!guest_memory_->Read(buffer, {bytes, r.size}).ok()) {
        return Refuse(Refusal::kBadPointer, r.size);
      }
      uint64_t v = 0;
      std::memcpy(&v, bytes, r.size);
      if (!ForwardWrite(*gpa, r.size, v, r.vcpu)) break;
    }
  }
  return 0;
}

uint64_t DeviceModel::HandleRepRun(const hv::IoRequest& r, bool read, uint64_t total) {
  if (r.addr > ~uint64_t{0} - total) return Refuse(Refusal::kOutsideBars, r.size);
  // One copy of the guest's buffer: it can change under us, so everything is decided on the copy.
  std::vector<uint8_t> buffer(total, 0xff);
  if (!read && !guest_memory_->Read(r.data, buffer).ok()) {
    return Refuse(Refusal::kBadPointer, r.size);
  }
  uint64_t done = 0;
  while (done < total) {
    const std::optional<Run> hit = NextRun(r.addr + done, r.size, total - done);
    if (!hit) break;
    const uint64_t run = hit->bytes;
    for (uint64_t i = 0; i < run / r.size; ++i) {
      if (read) {
        counters_.CountBarRead(hit->bar);
      } else {
        counters_.CountBarWrite(hit->bar);
      }
    }
    const std::span<uint8_t> part(buffer.data() + done, run);
    const Status moved =
        read ? aggregator_->ReadElements(hit->bar, hit->offset, r.size, part, r.vcpu)
             : aggregator_->WriteElements(hit->bar, hit->offset, r.size, part, r.vcpu);
    if (!moved.ok()) {
      counters_.CountRefusal(Refusal::kAggregatorError);
      // A failed element reads all-ones, and so does the rest of the transfer.
      if (read) std::memset(buffer.data() + done, 0xff, total - done);
      break;
    }
    if (!read && hit->bar == BarIndex::kBar0) TakeEventsCausedByWrite();
    done += run;
  }
  if (read && !guest_memory_->Write(r.data, buffer).ok()) {
    return Refuse(Refusal::kBadPointer, r.size);
  }
  return 0;
}

uint64_t DeviceModel::HandleFill(const hv::IoRequest& r) {
  const uint64_t total = uint64_t{r.count} * r.size;
  if (r.addr > ~uint64_t{0} - total) return Refuse(Refusal::kOutsideBars, r.size);
  const uint64_t value = r.data & Mask(r.size);
  uint64_t done = 0;
  while (done < total) {
    const std::optional<Run> hit = NextRun(r.addr + done, r.size, total - done);
    if (!hit) break;
    const uint64_t run = hit->bytes;
    counters_.CountBarWrites(hit->bar, run / r.size);
    if (!aggregator_
             ->FillElements(hit->bar, hit->offset, r.size, value,
                            static_cast<uint32_t>(run / r.size), r.vcpu)
             .ok()) {
      counters_.CountRefusal(Refusal::kAggregatorError);
      break;
    }
    done += run;
  }
  return 0;
}

std::optional<DeviceModel::Run> DeviceModel::NextRun(uint64_t gpa, uint32_t size, uint64_t bytes) {
  const auto hit = Decode(gpa, size);  // counts the refusal when it fails
  if (!hit) return std::nullopt;
  if (AbsentPvWindow(hit->first, hit->second)) {  // no driver moves blocks there
    counters_.CountRefusal(Refusal::kOutsideBars);
    return std::nullopt;
  }
  // As many whole elements as the BAR holds from here (a run that leaves it stops at its end).
  const uint64_t bar_left = mapped_[BarSlot(hit->first)]->second - gpa + 1;
  return Run{hit->first, hit->second, std::min(bytes, bar_left / size * size)};
}

std::optional<std::pair<BarIndex, uint64_t>> DeviceModel::Decode(uint64_t gpa, uint32_t size) {
  for (BarIndex bar : kBars) {
    const auto& range = mapped_[BarSlot(bar)];
    if (!range || gpa < range->first || gpa > range->second) continue;
    if (range->second - gpa < size - 1) {  // runs off the end of the BAR
      counters_.CountRefusal(Refusal::kOutsideBars);
      return std::nullopt;
    }
    const uint64_t offset = gpa - range->first;
    // BAR0 holds registers: naturally aligned accesses only. BAR1/BAR3 are memory apertures.
    if (bar == BarIndex::kBar0 && offset % size != 0) {
      counters_.CountRefusal(Refusal::kUnaligned);
      return std::nullopt;
    }
    return std::make_pair(bar, offset);
  }
  counters_.CountRefusal(Refusal::kOutsideBars);
  return std::nullopt;
}

bool DeviceModel::AbsentPvWindow(BarIndex bar, uint64_t offset) const {
  return !settings_.pv_window && bar == BarIndex::kBar0 && offset >= pv::kWindow &&
         offset < uint64_t{pv::kWindow} + pv::kWindowSize;
}

std::optional<uint64_t> DeviceModel::ForwardRead(uint64_t gpa, uint32_t size, uint32_t vcpu) {
  const auto hit = Decode(gpa, size);
  if (!hit) return std::nullopt;
  counters_.CountBarRead(hit->first);
  if (AbsentPvWindow(hit->first, hit->second)) return 0;  // no PV window: nothing there
  Result<uint64_t> value = aggregator_->Read(hit->first, hit->second, size, vcpu);
  if (!value.ok()) {
    counters_.CountRefusal(Refusal::kAggregatorError);
    return std::nullopt;
  }
  return *value & Mask(size);
}

bool DeviceModel::ForwardWrite(uint64_t gpa, uint32_t size, uint64_t value, uint32_t vcpu,
                               bool may_post) {
  const auto hit = Decode(gpa, size);
  if (!hit) return false;
  counters_.CountBarWrite(hit->first);
  if (AbsentPvWindow(hit->first, hit->second)) return true;  // dropped, as unclaimed MMIO
  if (settings_.pv_window && hit->first == BarIndex::kBar0 && hit->second == pv::kRegDoorbell) {
    ++pv_doorbells_;
  }
  // Only BAR1, a memory aperture, is posted: the guest observes what a write there did by reading
  // BAR1 back (which waits for the acknowledgement), or through the GPU, which acts on it only
  // after a later trapped access (a doorbell) or asynchronously anyway. BAR0 registers may answer
  // through guest memory at once (the PV doorbell: docs/PARAVIRT.md), so they are never posted.
  if (may_post && settings_.posted_writes && hit->first == BarIndex::kBar1) {
    // Sent once the guest's request is completed (SendPostedWrite): the vCPU need not wait for the
    // message to the aggregator either.
    unsent_post_ = PostedWrite{hit->first, hit->second, size, value, vcpu};
    ++posted_writes_;
    write_posted_ = true;
    return true;
  }
  if (!aggregator_->Write(hit->first, hit->second, size, value, vcpu).ok()) {
    counters_.CountRefusal(Refusal::kAggregatorError);
    return false;
  }
  if (hit->first == BarIndex::kBar0) TakeEventsCausedByWrite();
  return true;
}

void DeviceModel::TakeEventsCausedByWrite() {
  for (;;) {
    Result<std::optional<AggregatorEvent>> event = aggregator_->PollEvent();
    // A broken connection shows at the next call, which RunOnce reports.
    if (!event.ok() || !event->has_value()) return;
    if (!HandleAggregatorEvent(**event).ok()) return;
  }
}

void DeviceModel::SyncBarMappings() {
  std::array<std::optional<std::pair<uint64_t, uint64_t>>, 3> wanted;
  for (BarIndex bar : kBars) {
    if (auto base = config_.BarAddress(bar)) {
      wanted[BarSlot(bar)] = std::make_pair(*base, *base + config_.BarSize(bar) - 1);
    }
  }
  // Unmap everything that moved first, so two BARs trading places never overlap in between.
  for (size_t i = 0; i < 3; ++i) {
    if (mapped_[i] && mapped_[i] != wanted[i]) {
      DropRemaps(i);
      (void)server_->UnmapMmioRange(mapped_[i]->first, mapped_[i]->second);
      mapped_[i].reset();
    }
  }
  for (size_t i = 0; i < 3; ++i) {
    if (!wanted[i] || mapped_[i]) continue;
    bool overlaps = false;
    for (size_t j = 0; j < 3; ++j) {
      if (j != i && mapped_[j] && wanted[i]->first <= mapped_[j]->second &&
          mapped_[j]->first <= wanted[i]->second) {
        overlaps = true;
      }
    }
    // A BAR programmed on top of another stays unmapped until one of them moves; the hypervisor may
    // refuse a range too (it overlaps something of another server). Counted once per address.
    if (overlaps || !server_->MapMmioRange(wanted[i]->first, wanted[i]->second).ok()) {
      if (refused_at_[i] != wanted[i]) {
        counters_.CountRefusal(Refusal::kBarConflict);
        refused_at_[i] = wanted[i];
      }
      continue;
    }
    mapped_[i] = wanted[i];
    refused_at_[i].reset();
  }
}

void DeviceModel::SyncInterrupt(bool rising_edge) {
  if (config_.msi_enabled()) {
    // MSI is an edge: one message per rising edge of the line. INTx stays quiet meanwhile.
    if (intx_output_) {
      (void)server_->SetPciIntxLevel(settings_.sbdf, 0, false);
      intx_output_ = false;
    }
    if (rising_edge) (void)server_->InjectMsi(config_.msi_address(), config_.msi_data());
    return;
  }
  const bool want = line_asserted_ && !config_.intx_disabled();
  if (want != intx_output_) {
    (void)server_->SetPciIntxLevel(settings_.sbdf, 0, want);
    intx_output_ = want;
  }
}

Status DeviceModel::HandleAggregatorEvent(const AggregatorEvent& event) {
  if (const auto* irq = std::get_if<InterruptLevel>(&event)) {
    const bool rising = irq->asserted && !line_asserted_;
    line_asserted_ = irq->asserted;
    config_.set_interrupt_status(irq->asserted);
    SyncInterrupt(rising);
    return Status::Ok();
  }
  if (std::holds_alternative<BarMapRequest>(event) ||
      std::holds_alternative<BarUnmapRequest>(event)) {
    // In order: behind one that had to wait, the rest wait too.
    deferred_bar_events_.push_back(event);
    return ApplyDeferredBarEvents();
  }
  teardown_requested_ = true;
  return Status::Ok();
}

Status DeviceModel::ApplyDeferredBarEvents() {
  while (!deferred_bar_events_.empty()) {
    const AggregatorEvent& event = deferred_bar_events_.front();
    Status applied;
    uint32_t seq = 0;
    if (const auto* map = std::get_if<BarMapRequest>(&event)) {
      seq = map->seq;
      applied = MapBarMemory(*map);
    } else {
      const auto& unmap = std::get<BarUnmapRequest>(event);
      seq = unmap.seq;
      applied = UnmapBarMemory(unmap);
    }
    // Unavailable: the hypervisor cannot change the guest's memory map while a vCPU is inside an
    // access we have yet to serve (the Xen backend, hypervisor/xen/ioreq_server.cc); serve, then
    // try again (RunOnce). Trapping meanwhile is correct: the aggregator serves remapped pages by
    // trap too.
    if (applied.code() == StatusCode::kUnavailable) return Status::Ok();
    if (std::holds_alternative<BarMapRequest>(event)) {
      counters_.CountBarMap(applied.ok());
    } else if (applied.ok()) {
      counters_.CountBarUnmap();
    }
    deferred_bar_events_.pop_front();
    GPUVM_RETURN_IF_ERROR(aggregator_->AnswerBarRequest(seq, applied));
  }
  return Status::Ok();
}

Status DeviceModel::MapBarMemory(const BarMapRequest& r) {
  if (r.bar == BarIndex::kBar0)
    return Status::InvalidArgument("BAR0 holds registers: never remapped");
  const size_t slot = BarSlot(r.bar);
  if (!mapped_[slot]) {
    return Status::FailedPrecondition(std::string(BarName(r.bar)) + " is not decoding");
  }
  const uint64_t size = mapped_[slot]->second - mapped_[slot]->first + 1;
  if (r.length == 0 || r.offset % hv::kPageSize != 0 || r.length % hv::kPageSize != 0 ||
      r.backing_offset % hv::kPageSize != 0 || r.offset > size || r.length > size - r.offset) {
    return Status::OutOfRange("remap range outside " + std::string(BarName(r.bar)));
  }
  if (r.memory_fd < 0) return Status::InvalidArgument("BAR_MAP without its memory");
  const uint64_t first = mapped_[slot]->first + r.offset;
  const uint64_t last = first + r.length - 1;
  GPUVM_RETURN_IF_ERROR(
      server_->MapMemoryRange(first, last, hv::MemoryBacking{r.memory_fd, r.backing_offset}));
  remaps_[slot][r.offset] = {first, last};
  return Status::Ok();
}

Status DeviceModel::UnmapBarMemory(const BarUnmapRequest& r) {
  const size_t slot = BarSlot(r.bar);
  auto it = remaps_[slot].find(r.offset);
  if (it == remaps_[slot].end() || it->second.second - it->second.first + 1 != r.length) {
    // Also what a range withdrawn when its BAR moved answers: it traps already.
    return Status::NotFound("no such remapped range of " + std::string(BarName(r.bar)));
  }
  const Status s = server_->UnmapMemoryRange(it->second.first, it->second.second);
  if (s.code() == StatusCode::kUnavailable) return s;  // still mapped: tried again later
  remaps_[slot].erase(it);
  return s;
}

void DeviceModel::DropRemaps(size_t slot) {
  for (const auto& [offset, range] : remaps_[slot]) {
    (void)server_->UnmapMemoryRange(range.first, range.second);
  }
  remaps_[slot].clear();
}

Status DeviceModel::RunOnce(std::chrono::milliseconds timeout) {
  if (teardown_requested_) return Status::Aborted("the aggregator ended this VM's session");
  // Right after an access the guest's next one is usually microseconds away (a driver writes
  // registers and page-table entries in runs): poll the slots that long before sleeping, with the
  // guest's doorbell off meanwhile (docs/IPC.md, "Waiting").
  std::optional<hv::IoRequest> next;
  if (served_last_ && busy_poll_.enabled()) {
    Status failed;
    server_->BeginBusyPoll();
    busy_poll_.Spin([&] {
      Result<std::optional<hv::IoRequest>> r = server_->Poll();
      if (!r.ok()) failed = r.status();
      if (r.ok()) next = *r;
      return !r.ok() || next.has_value();
    });
    server_->EndBusyPoll();
    GPUVM_RETURN_IF_ERROR(failed);
    if (!next) {
      GPUVM_ASSIGN_OR_RETURN(next, server_->Poll());  // once more, now the flag is down
    }
  }
  // With a request in hand, look at the aggregator's descriptor without waiting — and only now and
  // then, so a guest that keeps the busy poll fed does not pay a system call per access, nor starve
  // interrupts for longer than kEventCheckInterval.
  bool aggregator_ready = false;
  bool housekeeping = false;
  const auto now = std::chrono::steady_clock::now();
  if (!next || now - last_wait_ >= kEventCheckInterval) {
    last_wait_ = now;
    epoll_event events[3];
    const int wait_ms = next ? 0
                        : deferred_bar_events_.empty()
                            ? static_cast<int>(timeout.count())
                            : 1;  // a deferred BAR_MAP is tried again soon
    const int n = ::epoll_wait(wait_.get(), events, 3, wait_ms);
    if (n < 0 && errno != EINTR) return Status::FromErrno(errno, "device model epoll_wait");
    for (int i = 0; i < n; ++i) {
      aggregator_ready |= events[i].data.u32 == kAggregatorTag;
      housekeeping |= events[i].data.u32 == kHousekeepingTag;
    }
  }
  // Serve the guest in bounded batches so aggregator events (interrupts) are never starved.
  served_last_ = false;
  for (int served = 0; served < 256; ++served) {
    std::optional<hv::IoRequest> request = std::exchange(next, std::nullopt);
    if (!request) {
      GPUVM_ASSIGN_OR_RETURN(request, server_->Poll());
    }
    if (!request) break;
    const uint64_t value = Handle(*request);
    const Status completed = server_->Complete(*request, value);
    SendPostedWrite();  // after the guest's vCPU resumed
    GPUVM_RETURN_IF_ERROR(completed);
    served_last_ = true;
  }
  GPUVM_RETURN_IF_ERROR(ApplyDeferredBarEvents());
  if (housekeeping && !server_->Housekeep().ok()) {
    // Nothing more will come there (the backend said so): stop watching, or it would wake us
    // forever.
    (void)::epoll_ctl(wait_.get(), EPOLL_CTL_DEL, server_->housekeeping_fd(), nullptr);
  }
  // Only when the aggregator's fd fired: events queued while we served come back through it.
  while (aggregator_ready) {
    GPUVM_ASSIGN_OR_RETURN(std::optional<AggregatorEvent> event, aggregator_->PollEvent());
    if (!event) break;
    GPUVM_RETURN_IF_ERROR(HandleAggregatorEvent(*event));
  }
  if (teardown_requested_) return Status::Aborted("the aggregator ended this VM's session");
  return Status::Ok();
}

}  // namespace gpuvm::dm
