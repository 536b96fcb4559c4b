#include "pvdrm-frontend/protocol/xenbus.h"

namespace gpuvm::pvdrm {

std::string FrontendDir(const DeviceAddress& device) {
  return "/local/domain/" + std::to_string(device.frontend) + "/device/" +
         std::string(kDeviceType) + "/" + std::to_string(device.devid);
}

std::string BackendDir(const DeviceAddress& device) {
  return "/local/domain/" + std::to_string(device.backend) + "/backend/" +
         std::string(kDeviceType) + "/" + std::to_string(device.frontend) + "/" +
         std::to_string(device.devid);
}

std::string_view StateName(XenbusState state) {
  switch (state) {
    case XenbusStateUnknown:
      return "Unknown";
    case XenbusStateInitialising:
      return "Initialising";
    case XenbusStateInitWait:
      return "InitWait";
    case XenbusStateInitialised:
      return "Initialised";
    case XenbusStateConnected:
      return "Connected";
    case XenbusStateClosing:
      return "Closing";
    case XenbusStateClosed:
      return "Closed";
    case XenbusStateReconfiguring:
      return "Reconfiguring";
    case XenbusStateReconfigured:
      return "Reconfigured";
  }
  return "?";
}

Result<uint64_t> ParseNumber(std::string_view text, uint64_t max) {
  if (text.empty() || text.size() > 20 || (text.size() > 1 && text[0] == '0')) {
    return Status::DataLoss("not a plain decimal number: '" + std::string(text.substr(0, 32)) +
                            "'");
  }
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return Status::DataLoss("not a plain decimal number: '" + std::string(text.substr(0, 32)) +
                              "'");
    }
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (digit > max || value > (max - digit) / 10) {
      return Status::DataLoss(std::string(text) + " is past " + std::to_string(max));
    }
    value = value * 10 + digit;
  }
  return value;
}

Result<uint64_t> ReadNumber(hv::Store& store, std::string_view path, uint64_t max) {
  GPUVM_ASSIGN_OR_RETURN(std::string text, store.Read(path));
  Result<uint64_t> value = ParseNumber(text, max);
  if (!value.ok()) return value.status().WithContext(path);
  return value;
}

Result<XenbusState> ReadState(hv::Store& store, std::string_view dir) {
  GPUVM_ASSIGN_OR_RETURN(uint64_t value,
                         ReadNumber(store, Key(dir, kStateKey), XenbusStateReconfigured));
  return static_cast<XenbusState>(value);
}

Status WriteState(hv::Store& store, std::string_view dir, XenbusState state) {
  return store.Write(Key(dir, kStateKey), std::to_string(static_cast<int>(state)));
}

Status AnnounceDevice(hv::Store& store, const DeviceAddress& device) {
  const std::string front = FrontendDir(device);
  const std::string back = BackendDir(device);
  GPUVM_RETURN_IF_ERROR(store.Write(Key(back, kFrontendKey), front));
  GPUVM_RETURN_IF_ERROR(store.Write(Key(back, kFrontendIdKey), std::to_string(device.frontend)));
  GPUVM_RETURN_IF_ERROR(WriteState(store, back, XenbusStateInitialising));
  GPUVM_RETURN_IF_ERROR(store.Write(Key(front, kBackendKey), back));
  GPUVM_RETURN_IF_ERROR(store.Write(Key(front, kBackendIdKey), std::to_string(device.backend)));
  return WriteState(store, front, XenbusStateInitialising);
}

Status RemoveDevice(hv::Store& store, const DeviceAddress& device) {
  Status front = store.Remove(FrontendDir(device));
  Status back = store.Remove(BackendDir(device));
  if (!front.ok() && front.code() != StatusCode::kNotFound) return front;
  if (!back.ok() && back.code() != StatusCode::kNotFound) return back;
  return Status::Ok();
}

}  // namespace gpuvm::pvdrm
