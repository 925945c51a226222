// Transport probe for the performance model (tools/tamp/perf_model.h): measures, on this
// machine and at model time, the CPU time gRPC spends per message and per payload byte.
//
// The job's four processes share the machine's cores, and the transport is part of what
// they share: every push and every answer costs protobuf work, HTTP/2 framing, a copy into
// and out of the socket on both ends and a thread wake-up on each. The probe measures that
// over the job's own stack: a ParameterServer callback service (proto/tamp.proto, as
// server/service.cc serves it) on a loopback TCP port in this process, called with the
// PushPull RPC through the callback client API (as worker/ps_client.cc calls it), in bursts
// of concurrent calls like a worker's pushes after backward. The service answers at once
// with an empty payload, so a call is one message of the probed payload size and one empty
// one; the process's CPU time (user + sys, every thread: client, server and gRPC's own) over
// the calls, at two payload sizes, gives the cost of a message and of a byte.
//
// Takes about half a second. Call it while nothing else runs in this process: every thread's
// CPU time counts.
#ifndef TAMP_TOOLS_TAMP_TRANSPORT_PROBE_H_
#define TAMP_TOOLS_TAMP_TRANSPORT_PROBE_H_

#include "absl/status/statusor.h"
#include "tools/tamp/perf_model.h"

namespace tamp::perf {

// MeasureTransportCpu()
//
// The CPU time of one message, sender and receiver together: ms_per_message from calls with
// empty payloads (two messages each), ms_per_byte from the extra CPU of 1 MiB payloads (the
// size of a raw chunk at the configs' partition_bytes). UNAVAILABLE if the loopback service
// cannot start or a call fails.
absl::StatusOr<TransportCpu> MeasureTransportCpu();

}  // namespace tamp::perf

#endif  // TAMP_TOOLS_TAMP_TRANSPORT_PROBE_H_
