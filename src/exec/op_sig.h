// Calls as their signatures (transports/connector_device.h: OpSig) tell them, in words, for the
// error a rank reports when its peers made another call than it did.
#pragma once

#include <string>

#include "transports/connector_device.h"

namespace ringcc {

// "AllReduce(1000 x float32, sum)", "Broadcast(16 x int8, root 2)", "send/recv of 400 bytes".
std::string describeCall(const OpSig& sig);

}  // namespace ringcc
