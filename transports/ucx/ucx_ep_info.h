// What an endpoint's lanes are, from UCX's own description of them (ucp_ep_print_info: UCX 1.13
// has no query for an endpoint's transports). Each lane line names its transport and device
// ("tcp/eth0") and what UCP uses the lane for: "am", "am_bw#0", "rma#0" (puts and gets),
// "rma_bw#0" (rendezvous only), "amo#0" (atomics), "tag", "keepalive", "wireup". An endpoint
// without an rma or amo lane has UCX emulate those operations with active messages on its am
// lane (TCP, for one).
//
// The parsers take the text, so they are tested on samples without an endpoint; text they do
// not recognize says "no such lane" (a caller then keeps its other path).
#pragma once

#include <ucp/api/ucp.h>

#include <string>

namespace ringcc {

// ucp_ep_print_info's text for ep.
std::string endpointInfo(ucp_ep_h ep);
// The transports and devices of its lanes, each once ("tcp/lo.0 rc_mlx5/mlx5_0:1"); "?" if none.
std::string laneTransports(const std::string& info);
// Whether some lane serves `usage` ("rma", "amo"; "rma_bw" is not "rma").
bool lanesServe(const std::string& info, const std::string& usage);

}  // namespace ringcc
