// What every engine (host, CUDA) does alike: when a communicator is made, the planner's view of
// the communicator, the check that the ranks read the same settings, and channel 0's ring
// connected (so that unreachable peers show up at init, not at the first call); per batch, the
// binding of a plan's ports to connections.
#pragma once

#include <vector>

#include "nccl.h"
#include "src/exec/connections.h"
#include "src/plan/planner.h"

struct ncclComm;

namespace ringcc {

// What the planner needs to know about this communicator, read once at init.
PlanContext planContext(const ncclComm* comm, const ConnectionTable& conns);

// The protocols of `allowed` (NCCL_PROTO's mask) that the connections can run, so that the
// tuner never picks one the runner would refuse: LL needs LL memory on the ring connections
// (none where the communicator uses the network). Only LL allowed and none there: Simple, with
// a WARN.
uint32_t protocolsConnectionsRun(uint32_t allowed, const ConnGeometry& ring, int rank);

// The cost model's figures for this communicator. A CUDA communicator moves data with a block
// per channel over the topology graph's links: the ring search's figures
// (deviceLinkFigures). A host communicator is bound by its threads' memory copies, which one
// thread per rank makes for every channel: the figures calibrated on host memory
// (linkFiguresFor); the graph's nominal link speeds would only make channels look free.
LinkFigures commLinkFigures(const ncclComm* comm);

// Collective (at init): every rank compares the settings it read (NCCL_BUFFSIZE, channel
// bounds, NCCL_PROTO, NCCL_ALGO, NCCL_CHUNKSIZE) with every other rank's. Ranks that read
// different values would cut their messages differently and fail later, less clearly:
// ncclInvalidUsage on every rank instead, naming the setting and two ranks.
ncclResult_t checkSharedSettings(ncclComm* comm, const ConnectionTable& conns,
                                 const TuneConfig& tune);

// Connects channel 0's ring. Collective.
ncclResult_t connectFirstRing(ncclComm* comm, ConnectionTable& conns);

// Binding a plan to connections, per batch. The connections the jobs' ports name, in job and
// port order, into *keys (cleared first).
void planPortKeys(const Plan& plan, std::vector<PortKey>* keys);
// The view and connector of each port of `job` (both resized to its ports); ncclInternalError
// naming the port if a connection is missing (ensure() made them all).
ncclResult_t bindPorts(const ConnectionTable& conns, const PlanJob& job,
                       std::vector<ConnectorView>* views,
                       std::vector<const Connector*>* connectors);

}  // namespace ringcc
