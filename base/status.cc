#include "base/status.h"

#include <cerrno>
#include <cstring>

namespace gpuvm {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kOutOfRange: return "OutOfRange";
    case StatusCode::kPermissionDenied: return "PermissionDenied";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kDeadlineExceeded: return "DeadlineExceeded";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kInternal: return "Internal";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) state_ = std::make_unique<State>(State{code, std::move(message)});
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  return *this;
}

Status Status::FromErrno(int err, std::string_view what) {
  StatusCode code = StatusCode::kInternal;
  switch (err) {
    case ENOENT: code = StatusCode::kNotFound; break;
    case EEXIST: code = StatusCode::kAlreadyExists; break;
    case EINVAL: code = StatusCode::kInvalidArgument; break;
    case EACCES:
    case EPERM: code = StatusCode::kPermissionDenied; break;
    case ENOMEM:
    case ENOSPC:
    case EMFILE: code = StatusCode::kResourceExhausted; break;
    case EAGAIN:
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE: code = StatusCode::kUnavailable; break;
    case ETIMEDOUT: code = StatusCode::kDeadlineExceeded; break;
    default: break;
  }
  return Status(code, std::string(what) + ": " + std::strerror(err));
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return ok() ? kEmpty : state_->message;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(state_->code)) + ": " + state_->message;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return Status();
  return Status(state_->code, std::string(context) + ": " + state_->message);
}

}  // namespace gpuvm
