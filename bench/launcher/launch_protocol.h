// What ringcc-run hands its children, and the small control channel between them.
//
// Environment of every child:
//   RINGCC_RANK        this process's index, 0..RINGCC_NRANKS-1
//   RINGCC_NRANKS      number of processes
//   RINGCC_LOCAL_RANK  index among the processes on this host (= RINGCC_RANK: one host)
//   RINGCC_LOCAL_SIZE  processes on this host
//   RINGCC_UNIQUE_ID   the ncclUniqueId from the launcher's ncclGetUniqueId, as 256 hex digits
//   RINGCC_CTRL_FD     the child's end of a socket to the launcher (the control channel)
//
// The control channel lets the perf tools combine timings and error counts across processes
// without the library under test (as nccl-tests uses MPI): each child sends one request and
// blocks until the launcher, having one request from every child, answers all of them.
// Requests: allreduce of doubles (sum, min or max) or gather of byte strings (everyone gets
// all, in rank order). If any child exits or closes its channel while others wait, the
// launcher closes theirs: a waiting child sees end-of-file instead of hanging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nccl.h"

namespace ringcc::bench {

inline constexpr const char* kEnvRank = "RINGCC_RANK";
inline constexpr const char* kEnvNranks = "RINGCC_NRANKS";
inline constexpr const char* kEnvLocalRank = "RINGCC_LOCAL_RANK";
inline constexpr const char* kEnvLocalSize = "RINGCC_LOCAL_SIZE";
inline constexpr const char* kEnvUniqueId = "RINGCC_UNIQUE_ID";
inline constexpr const char* kEnvCtrlFd = "RINGCC_CTRL_FD";

// 256 lowercase hex digits, and back (nullopt unless exactly 256 hex digits).
std::string uniqueIdToHex(const ncclUniqueId& id);
std::optional<ncclUniqueId> uniqueIdFromHex(const std::string& hex);

// What ringcc-run hands a rank: its index, the rank count and the unique id, read from the
// environment (nullopt unless all three are set and the id parses).
struct LaunchedRank {
  int rank = 0;
  int nranks = 0;
  ncclUniqueId id;
};
std::optional<LaunchedRank> launchedRankFromEnv();

enum class CtrlOp : uint32_t { Allreduce = 1, Gather = 2 };
enum class CtrlReduce : uint32_t { Sum = 0, Min = 1, Max = 2 };

struct CtrlMessage {
  CtrlOp op = CtrlOp::Allreduce;
  CtrlReduce reduce = CtrlReduce::Sum;
  std::string payload;  // allreduce: doubles; gather: bytes
};

inline constexpr uint32_t kCtrlMagic = 0x52434331;  // "RCC1"
inline constexpr size_t kCtrlHeaderBytes = 16;      // magic, op, reduce, payload length
inline constexpr size_t kCtrlMaxPayload = 16u << 20;

std::string encodeCtrl(const CtrlMessage& m);
// Takes one whole message off the front of `buf`. nullopt if incomplete; sets `bad` if the
// bytes cannot be a message.
std::optional<CtrlMessage> decodeCtrl(std::string& buf, bool& bad);

// The launcher's side: one request per child, in rank order, into the reply all get.
// False (with err) if they disagree in kind or size.
bool combineCtrl(const std::vector<CtrlMessage>& requests, CtrlMessage& reply, std::string& err);

// The child's side. Calls block until every child made the same call.
class ControlClient {
 public:
  explicit ControlClient(int fd) : fd_(fd) {}
  bool allreduce(double* values, size_t n, CtrlReduce op, std::string& err);
  bool gather(const std::string& mine, std::vector<std::string>& all, std::string& err);

 private:
  bool roundTrip(const CtrlMessage& request, CtrlMessage& reply, std::string& err);
  int fd_;
};

}  // namespace ringcc::bench
