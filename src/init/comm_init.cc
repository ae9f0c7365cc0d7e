#include "src/init/comm_init.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "src/base/error.h"
#include "src/base/log.h"
#include "src/base/mem_kind.h"
#include "src/base/param.h"
#include "src/base/pci_bus.h"
#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/grow.h"
#include "src/bootstrap/sub_group.h"
#include "src/bootstrap/unique_id.h"
#include "src/core/comm_topo.h"
#include "src/init/engine_factory.h"
#include "src/monitor/hang_watcher.h"
#include "src/topo/detect.h"
#include "src/trace/hang_report.h"
#include "src/trace/trace.h"

namespace ringcc {
namespace {

// What each rank sends the others at init.
struct InitInfo {
  PeerInfo peer;
  uint64_t nonce;  // rank 0's becomes the communicator's hash
};

using BootstrapMaker = std::function<ncclResult_t(Communicator*)>;

uint64_t randomNonce() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
}

// NCCL_DEBUG=VERSION (and every level above it) prints the version once per process, at the
// first communicator init, as NCCL does: the line a user greps for to see which library got
// loaded.
void showVersionOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    RINGCC_LOG(LogLevel::Version, kLogAll, "NCCL version %d.%d.%d%s (ringcc)", NCCL_MAJOR,
               NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX);
  });
}

// The part of init that talks to peers; runs on the caller's thread or the init thread.
ncclResult_t initBody(Communicator* comm, const BootstrapMaker& makeBootstrap) {
  CommScope scope(comm);
  showVersionOnce();
  RINGCC_CHECK(makeBootstrap(comm));
  RINGCC_CHECK(chooseMemKind(&comm->memKind, &comm->cudaDev));

  // The host's topology (NCCL_TOPO_FILE or detection) before the allgather: every rank
  // tells the others where it runs and what its host looks like.
  HostTopology topo;
  RINGCC_CHECK(loadHostTopology(&topo));
  std::vector<InitInfo> infos(comm->nranks);
  // A CUDA rank names its GPU by PCI bus id: ranks of other processes number devices their
  // own way (src/base/pci_bus.h).
  int64_t busId = -1;
  if (comm->memKind == MemoryKind::Cuda) RINGCC_CHECK(cudaDeviceBusId(comm->cudaDev, &busId));
  infos[comm->rank].peer = localPeerInfo(comm->rank, comm->memKind, comm->cudaDev, busId);
  infos[comm->rank].peer.numaNode = currentNumaNode();
  infos[comm->rank].peer.topoHash = topo.hash;
  infos[comm->rank].nonce = randomNonce();
  RINGCC_CHECK(comm->bootstrap->allGather(infos.data(), sizeof(InitInfo)));
  comm->peers.resize(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) {
    if (infos[r].peer.rank != r)
      return failPeer(ncclRemoteError, r, "init", "peer info names rank %d", infos[r].peer.rank);
    if (infos[r].peer.memory != comm->memKind)
      return failPeer(ncclInvalidUsage, r, "init",
                      "peer uses another memory kind (host vs cuda); set RINGCC_DEVICE alike "
                      "on every rank");
    comm->peers[r] = infos[r].peer;
  }
  comm->commHash = infos[0].nonce;
  RINGCC_CHECK(setupCommTopology(comm, topo));
  watchComm(comm);
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  comm->tracer = Tracer::fromEnv(
      TraceSource{comm->commHash, comm->rank, comm->nranks, static_cast<int>(getpid()), host});

  RINGCC_CHECK(createEngine(comm, &comm->engine));
  RINGCC_CHECK(comm->bootstrap->barrier());
  LOG_INFO(kLogInit, "comm %p rank %d nranks %d commHash %016llx - Init COMPLETE",
           static_cast<void*>(comm), comm->rank, comm->nranks,
           static_cast<unsigned long long>(comm->commHash));
  return ncclSuccess;
}

// Runs initBody now (blocking) or on comm->initThread (non-blocking). On a blocking
// failure the communicator is freed and *out cleared.
ncclResult_t startInit(Communicator* comm, BootstrapMaker makeBootstrap, Communicator** out) {
  *out = comm;
  if (!comm->config.blocking) {
    comm->asyncError.store(ncclInProgress);
    comm->initThread = std::thread([comm, makeBootstrap] {
      CallGuard guard(comm);
      ncclResult_t r = initBody(comm, makeBootstrap);
      if (r == ncclSuccess)
        comm->asyncError.store(ncclSuccess);
      else
        comm->recordError(r);
    });
    return ncclInProgress;
  }
  ncclResult_t r = initBody(comm, makeBootstrap);
  if (r != ncclSuccess) {
    delete comm;
    *out = nullptr;
  }
  return r;
}

Communicator* newComm(int rank, int nranks, const CommConfig& config) {
  auto* comm = new Communicator;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->config = config;
  return comm;
}

// A communicator of some of `parent`'s ranks (`members`, parent ranks in new-rank order).
ncclResult_t startMemberInit(Communicator* parent, const std::vector<int>& members,
                             const CommConfig& config, Communicator** out) {
  int newRank =
      static_cast<int>(std::find(members.begin(), members.end(), parent->rank) - members.begin());
  Communicator* comm = newComm(newRank, static_cast<int>(members.size()), config);
  comm->cudaDev = parent->cudaDev;
  return startInit(
      comm,
      [parent, members](Communicator* c) {
        return bootstrapSubGroup(*parent->bootstrap, members, &c->abortFlag, &c->bootstrap);
      },
      out);
}

}  // namespace

ncclResult_t commInitRank(Communicator** out, int nranks, const ncclUniqueId& id, int rank,
                          const CommConfig& config) {
  Communicator* comm = newComm(rank, nranks, config);
  return startInit(
      comm,
      [id](Communicator* c) {
        return Bootstrap::create(id, c->rank, c->nranks, &c->abortFlag, &c->bootstrap);
      },
      out);
}

ncclResult_t commInitAll(Communicator** comms, int nranks, const int* devlist) {
  ncclUniqueId id;
  RINGCC_CHECK(bootstrapGetUniqueId(&id));
  std::vector<ncclResult_t> results(nranks, ncclSuccess);
  std::vector<ErrorCause> causes(nranks);  // raised on the helper threads
  std::vector<std::thread> threads;
  // Helper threads have no current CUDA context: where the caller would make CUDA
  // communicators, each binds to its rank's device first (devlist, else rank r on device r).
  const char* bindWhy = initThreadsNeedDevice();
  // Every device checked before any rank starts: a rank failing to bind would leave the others
  // waiting for it in the bootstrap.
  for (int r = 0; bindWhy && r < nranks; ++r)
    RINGCC_CHECK(bindThreadToDevice(devlist ? devlist[r] : r, bindWhy, /*makeCurrent=*/false));
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      CommConfig config;
      comms[r] = nullptr;
      results[r] =
          bindWhy ? bindThreadToDevice(devlist ? devlist[r] : r, bindWhy, true) : ncclSuccess;
      if (results[r] == ncclSuccess) results[r] = commInitRank(&comms[r], nranks, id, r, config);
      if (results[r] != ncclSuccess)
        causes[r] = lastError();
      else if (comms[r]->memKind == MemoryKind::Host)  // a CUDA one knows its device
        comms[r]->cudaDev = devlist ? devlist[r] : r;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < nranks; ++r) {
    if (results[r] == ncclSuccess) continue;
    for (int q = 0; q < nranks; ++q) {
      if (comms[q]) commDestroy(comms[q]);
      comms[q] = nullptr;
    }
    adoptError(causes[r]);
    return results[r];
  }
  return ncclSuccess;
}

ncclResult_t commSplit(Communicator* parent, int color, int key, Communicator** out,
                       const CommConfig& config) {
  struct ColorKey {
    int color, key;
  };
  std::vector<ColorKey> all(parent->nranks);
  all[parent->rank] = {color, key};
  RINGCC_CHECK(parent->bootstrap->allGather(all.data(), sizeof(ColorKey)));
  *out = nullptr;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::vector<int> colors, keys;
  for (const ColorKey& ck : all) {
    colors.push_back(ck.color);
    keys.push_back(ck.key);
  }
  std::vector<int> members = splitMembers(colors, keys, parent->rank);
  return startMemberInit(parent, members, config, out);
}

ncclResult_t commShrink(Communicator* parent, const std::vector<int>& exclude, Communicator** out,
                        const CommConfig& config, int flags) {
  if (flags & NCCL_SHRINK_ABORT) {
    if (parent->engine) parent->engine->abortOps();
  }
  std::vector<int> members;
  for (int r = 0; r < parent->nranks; ++r)
    if (std::find(exclude.begin(), exclude.end(), r) == exclude.end()) members.push_back(r);
  return startMemberInit(parent, members, config, out);
}

ncclResult_t commGrowId(Communicator* comm, ncclUniqueId* id) {
  if (comm->growIds.pending)
    return fail(ncclInvalidUsage, "ncclCommGetUniqueId",
                "this communicator's previous grow id is not consumed yet: grow with it "
                "(ncclCommGrow) before asking for another");
  RINGCC_CHECK(bootstrapNewGrowRoot(comm->nranks, id));
  comm->growIds.pending = true;
  comm->growIds.id = *id;
  return ncclSuccess;
}

namespace {

bool sameId(const ncclUniqueId& a, const ncclUniqueId& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

// The coordinator's id against what its communicator handed out: consumes it if it is the
// pending one; else says why not (the grow goes on, refused, so the others hear of it).
GrowRole takeGrowId(Communicator* parent, const ncclUniqueId* id) {
  if (id == nullptr) return GrowRole::kMember;
  Communicator::GrowIds& g = parent->growIds;
  if (g.pending && sameId(g.id, *id)) {
    g.pending = false;
    g.consumedOne = true;
    g.consumed = *id;
    return GrowRole::kCoordinator;
  }
  if (g.consumedOne && sameId(g.consumed, *id))
    fail(ncclInvalidUsage, "ncclCommGrow",
         "uniqueId was consumed by an earlier grow: ids of ncclCommGetUniqueId are single-use "
         "(call it again for the next grow)");
  else
    fail(ncclInvalidUsage, "ncclCommGrow",
         "uniqueId is not the id ncclCommGetUniqueId gave this communicator (%s)",
         g.pending ? "it has another pending" : "it has none pending");
  return GrowRole::kRefused;
}

// The parent's hold for the grow's lifetime (the non-blocking init thread's too), so that a
// destroy of the parent waits for the exchange over its bootstrap instead of freeing it.
using ParentHold = std::shared_ptr<CallGuard>;

}  // namespace

ncclResult_t commGrow(Communicator* parent, int nRanks, const ncclUniqueId* id, Communicator** out,
                      const CommConfig& config) {
  GrowRole role = takeGrowId(parent, id);
  ErrorCause refusal = role == GrowRole::kRefused ? lastError() : ErrorCause{};
  Communicator* comm = newComm(parent->rank, nRanks, config);
  comm->cudaDev = parent->cudaDev;
  ParentHold hold = std::make_shared<CallGuard>(parent);
  ncclUniqueId grownId = id ? *id : ncclUniqueId{};
  ncclResult_t r = startInit(
      comm,
      [parent, hold, role, grownId, nRanks](Communicator* c) {
        return bootstrapGrowExisting(*parent->bootstrap, role, &grownId, nRanks, &c->abortFlag,
                                     &c->bootstrap);
      },
      out);
  // A refused id: every rank fails (the exchange always does then), this one with its own
  // cause rather than the echo of it.
  if (role == GrowRole::kRefused && r != ncclInProgress && r != ncclSuccess) {
    adoptError(refusal);
    return ncclInvalidUsage;
  }
  return r;
}

ncclResult_t commGrowJoin(int nRanks, const ncclUniqueId& id, int rank, Communicator** out,
                          const CommConfig& config) {
  Communicator* comm = newComm(rank, nRanks, config);
  return startInit(
      comm,
      [id](Communicator* c) {
        LOG_INFO(kLogInit | kLogBootstrap, "grow: new rank %d of %d joins", c->rank, c->nranks);
        return Bootstrap::create(id, c->rank, c->nranks, &c->abortFlag, &c->bootstrap);
      },
      out);
}

ncclResult_t commFinalize(Communicator* comm) {
  // Host communicators complete every operation before its call returns, so nothing is
  // left to flush; finalizing only forbids further operations.
  comm->finalized.store(true);
  return ncclSuccess;
}

ncclResult_t commRevoke(Communicator* comm) {
  comm->revoked.store(true);
  if (comm->engine) comm->engine->abortOps();
  return ncclSuccess;
}

ncclResult_t commDestroy(Communicator* comm) {
  if (comm->initThread.joinable()) comm->initThread.join();
  comm->waitForCalls();
  delete comm;
  return ncclSuccess;
}

ncclResult_t commAbort(Communicator* comm) {
  // Everything that waits (bootstrap reads, executor waits, a non-blocking init) polls the
  // abort flag, so the joins below end in bounded time.
  comm->abortFlag.store(true);
  if (comm->initThread.joinable()) comm->initThread.join();
  if (comm->engine) comm->engine->abortOps();
  if (comm->bootstrap) comm->bootstrap->abort();
  comm->waitForCalls();
  delete comm;
  return ncclSuccess;
}

}  // namespace ringcc
