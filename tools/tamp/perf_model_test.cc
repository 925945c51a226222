#include "tools/tamp/perf_model.h"

#include "gtest/gtest.h"

namespace tamp::perf {
namespace {

TEST(ParseBandwidthTest, ReadsTcUnitsAndUnshaped) {
  EXPECT_DOUBLE_EQ(ParseBandwidth("1gbit")->bits_per_second, 1e9);
  EXPECT_DOUBLE_EQ(ParseBandwidth("10gbit")->bits_per_second, 1e10);
  EXPECT_DOUBLE_EQ(ParseBandwidth("500mbit")->bits_per_second, 5e8);
  EXPECT_DOUBLE_EQ(ParseBandwidth("2.5gbit")->bits_per_second, 2.5e9);
  EXPECT_DOUBLE_EQ(ParseBandwidth("100kbit")->bits_per_second, 1e5);
  EXPECT_DOUBLE_EQ(ParseBandwidth("8000bit")->bits_per_second, 8000);
  EXPECT_DOUBLE_EQ(ParseBandwidth("unshaped")->bits_per_second, 0);
  EXPECT_DOUBLE_EQ(ParseBandwidth("inf")->bits_per_second, 0);
  EXPECT_EQ(ParseBandwidth("10gbit")->name, "10gbit");
}

TEST(ParseBandwidthTest, RejectsOtherText) {
  for (const char* bad : {"", "10gbps", "gbit", "0gbit", "-1gbit", "1 gbit", "fast"}) {
    absl::StatusOr<Link> link = ParseBandwidth(bad);
    ASSERT_FALSE(link.ok()) << bad;
    EXPECT_EQ(link.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(link.status().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << link.status().message();
  }
  for (const char* not_positive : {"0gbit", "-1gbit", "0.0mbit", "-inf"}) {
    EXPECT_NE(ParseBandwidth(not_positive).status().message().find("a rate must be above 0"),
              std::string::npos)
        << not_positive;
  }
  EXPECT_NE(ParseBandwidth("10gbps").status().message().find("expected a rate like"),
            std::string::npos);
}

// A link of 1000 bytes per ms, no transport limit or latency.
Link KilobytePerMs() { return Link{"8mbit", 8e6}; }

ChunkCost Chunk(uint32_t tensor, uint64_t push_bytes, uint64_t pull_bytes) {
  ChunkCost chunk;
  chunk.tensor = tensor;
  chunk.rounds = {RoundCost{}};
  chunk.rounds[0].push_bytes = push_bytes;
  chunk.pull_bytes = pull_bytes;
  return chunk;
}

TEST(PredictStepTest, WireBoundStepIsEveryByteOverTheSharedLink) {
  StepInputs in;
  in.num_workers = 2;
  in.tensor_ready_ms = {0};
  in.chunks = {Chunk(0, 1000, 1000)};
  in.link = KilobytePerMs();
  // Two pushes back to back (2 ms), then two pulls (2 ms).
  absl::StatusOr<StepPrediction> p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->step_ms, 4.0);
  EXPECT_DOUBLE_EQ(p->wire_ms, 4.0);
  EXPECT_DOUBLE_EQ(p->link_busy_ms, 4.0);
  EXPECT_EQ(p->push_bytes, 2000u);
  EXPECT_EQ(p->pull_bytes, 2000u);

  // Latency and per-message overhead: each of the two hops waits 0.5 ms more, and each
  // message carries 500 bytes more (0.5 ms on the link).
  in.transport.message_latency_ms = 0.5;
  in.transport.message_overhead_bytes = 500;
  EXPECT_DOUBLE_EQ(PredictStep(in)->step_ms, 4.0 + 2 * 0.5 + 4 * 0.5);
}

TEST(ParseTopologyTest, ReadsSharedAndHostsOnly) {
  EXPECT_EQ(*ParseTopology("shared"), Topology::kShared);
  EXPECT_EQ(*ParseTopology("hosts"), Topology::kHosts);
  absl::StatusOr<Topology> bad = ParseTopology("rack");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("\"rack\""), std::string::npos) << bad.status().message();
}

TEST(PredictStepTest, OneServerHostsDownlinkCarriesEveryWorkersPush) {
  StepInputs in;
  in.num_workers = 4;
  in.tensor_ready_ms = {0};
  in.chunks = {Chunk(0, 1000, 1000)};
  in.link = KilobytePerMs();
  in.topology = Topology::kHosts;
  // The four pushes leave their own uplinks at once but queue on the server's downlink
  // (4 x 1000 bytes: 4 ms); the server's uplink then sends the update four times (4 ms).
  absl::StatusOr<StepPrediction> p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->step_ms, 8.0);
  EXPECT_DOUBLE_EQ(p->link_busy_ms, 4.0);  // The server's downlink, and its uplink.
  EXPECT_EQ(p->push_bytes, 4000u);
  EXPECT_EQ(p->pull_bytes, 4000u);
  // One shared link carries the same eight messages: the same step, but twice as busy.
  in.topology = Topology::kShared;
  EXPECT_DOUBLE_EQ(PredictStep(in)->step_ms, 8.0);
  EXPECT_DOUBLE_EQ(PredictStep(in)->link_busy_ms, 8.0);
}

TEST(PredictStepTest, HostsSpreadPushesAndPullsOverTheServersLinks) {
  StepInputs in;
  in.num_workers = 2;
  in.num_shards = 2;
  in.tensor_ready_ms = {0};
  in.chunks = {Chunk(0, 1000, 1000), Chunk(0, 1000, 1000)};
  in.chunks[1].shard = 1;
  in.link = KilobytePerMs();
  in.topology = Topology::kHosts;
  // Each worker's uplink sends chunk 0 (0-1 ms) then chunk 1 (1-2 ms). Shard 0's downlink
  // takes worker 0's push at 0-1 and worker 1's at 1-2; shard 1's takes them at 1-2 and
  // 2-3. Shard 0's uplink sends its update at 2-3 and 3-4; shard 1's at 3-4 and 4-5, which
  // worker 1's downlink is free to take (it took shard 0's at 3-4): 5 ms, not the 8 ms of
  // eight messages on one link. Every link carries 2 ms of messages.
  absl::StatusOr<StepPrediction> p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->step_ms, 5.0);
  EXPECT_DOUBLE_EQ(p->link_busy_ms, 2.0);
  in.topology = Topology::kShared;
  EXPECT_DOUBLE_EQ(PredictStep(in)->step_ms, 8.0);

  // Latency is paid once per message whatever its path: push, then pull.
  in.topology = Topology::kHosts;
  in.transport.message_latency_ms = 0.5;
  EXPECT_DOUBLE_EQ(PredictStep(in)->step_ms, 5.0 + 2 * 0.5);
}

TEST(PredictStepTest, TransportCeilingLimitsAnUnshapedLink) {
  StepInputs in;
  in.tensor_ready_ms = {0};
  in.chunks = {Chunk(0, 1000, 3000)};
  in.link = Link{"unshaped", 0};
  EXPECT_DOUBLE_EQ(PredictStep(in)->step_ms, 0.0);
  in.transport.max_bytes_per_ms = 1000;
  EXPECT_DOUBLE_EQ(PredictStep(in)->step_ms, 4.0);
  // A shaped link faster than the ceiling changes nothing.
  in.link = Link{"10gbit", 1e10};
  EXPECT_DOUBLE_EQ(PredictStep(in)->step_ms, 4.0);
}

TEST(PredictStepTest, CommunicationOfEarlyTensorsHidesBehindBackward) {
  StepInputs in;
  in.compute_ms = 10;
  in.tensor_ready_ms = {10, 2};  // Tensor 1 (the last layer) is ready first.
  in.chunks = {Chunk(0, 1000, 1000), Chunk(1, 1000, 1000)};
  for (ChunkCost& chunk : in.chunks) {
    chunk.decode_ms = 0.5;
    chunk.apply_ms = 0.25;
  }
  in.link = KilobytePerMs();
  // Chunk 1: pushed at 2, answered by 4, applied when backward ends: 10 -> 10.75.
  // Chunk 0: pushed at 10, answered at 12, applied 12 -> 12.75.
  absl::StatusOr<StepPrediction> p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->step_ms, 12.75);
  EXPECT_DOUBLE_EQ(p->compute_ms, 10);
  EXPECT_DOUBLE_EQ(p->decode_ms, 1.0);
  EXPECT_DOUBLE_EQ(p->apply_ms, 0.5);
  EXPECT_DOUBLE_EQ(p->wire_ms, 12.75 - 10 - 1.5);
}

TEST(PredictStepTest, EncodingDelaysTheRestOfBackward) {
  StepInputs in;
  in.compute_ms = 10;
  in.tensor_ready_ms = {10, 2};
  in.chunks = {Chunk(0, 0, 0), Chunk(1, 0, 0)};
  in.chunks[0].rounds[0].encode_ms = 1;
  in.chunks[1].rounds[0].encode_ms = 3;
  // 2 ms compute, 3 ms encode, 8 ms compute, 1 ms encode.
  absl::StatusOr<StepPrediction> p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->step_ms, 14);
  EXPECT_DOUBLE_EQ(p->encode_ms, 4);
  EXPECT_DOUBLE_EQ(p->wire_ms, 0);
}

TEST(PredictStepTest, ShardAnswersOnceEveryWorkerHasPushed) {
  StepInputs in;
  in.num_workers = 2;
  in.num_shards = 2;
  in.tensor_ready_ms = {0};
  in.chunks = {Chunk(0, 0, 0)};
  in.chunks[0].shard = 1;
  in.chunks[0].rounds[0].server_decode_ms = 1;
  in.chunks[0].server_update_ms = 2;
  // Both pushes arrive at 0; the shard decodes them one after the other, then updates.
  absl::StatusOr<StepPrediction> p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->step_ms, 4);
  EXPECT_DOUBLE_EQ(p->server_ms, 4);
}

TEST(PredictStepTest, MultiRoundCodecWaitsForEachRoundsAnswer) {
  StepInputs in;
  in.tensor_ready_ms = {0};
  ChunkCost chunk = Chunk(0, 1000, 1000);
  chunk.rounds.resize(2);
  chunk.rounds[0].encode_ms = 1;
  chunk.rounds[0].server_round_ms = 1;
  chunk.rounds[0].answer_bytes = 500;
  chunk.rounds[1].encode_ms = 2;
  chunk.rounds[1].push_bytes = 1000;
  in.chunks = {chunk};
  in.link = KilobytePerMs();
  // Encode 0-1, push 1-2, round 2-3, answer 3-3.5, encode 3.5-5.5, push -6.5, pull -7.5.
  absl::StatusOr<StepPrediction> p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->step_ms, 7.5);
  EXPECT_DOUBLE_EQ(p->encode_ms, 3);
  EXPECT_EQ(p->push_bytes, 2000u);
  EXPECT_EQ(p->pull_bytes, 1500u);
}

// Two workers and two shards on one tensor and one chunk: each worker computes 10 ms and
// encodes 2, decodes 1 and applies 1 (14 ms of its own work); the shard decodes each push in
// 1 ms and updates in 2; 1000 bytes each way over a link of 1000 bytes per ms.
StepInputs CpuHeavyStep() {
  StepInputs in;
  in.num_workers = 2;
  in.num_shards = 2;
  in.compute_ms = 10;
  in.tensor_ready_ms = {10};
  in.chunks = {Chunk(0, 1000, 1000)};
  in.chunks[0].rounds[0].encode_ms = 2;
  in.chunks[0].rounds[0].server_decode_ms = 1;
  in.chunks[0].server_update_ms = 2;
  in.chunks[0].decode_ms = 1;
  in.chunks[0].apply_ms = 1;
  in.link = KilobytePerMs();
  return in;
}

TEST(CpuWorkMsTest, AddsEveryProcesssWorkAndTheTransports) {
  StepInputs in = CpuHeavyStep();
  // Workers 2 x 14, the shard 2 x 1 + 2: 32 ms.
  EXPECT_DOUBLE_EQ(CpuWorkMs(in), 32);
  // Four messages (two pushes, two answers) of 1000 bytes each.
  in.transport_cpu.ms_per_message = 0.5;
  in.transport_cpu.ms_per_byte = 0.001;
  EXPECT_DOUBLE_EQ(CpuWorkMs(in), 32 + 4 * 0.5 + 4000 * 0.001);
}

// Tensor fusion: first-round pushes of chunks below fusion_bytes share their shard's calls,
// batched in the order their tensors are ready.
TEST(CpuWorkMsTest, FusedFirstRoundsShareTheirCalls) {
  StepInputs in;
  in.num_workers = 2;
  in.num_shards = 2;
  in.tensor_ready_ms = {5, 4, 3, 2, 1, 0};
  for (uint32_t t = 0; t < 6; ++t) {
    in.chunks.push_back(Chunk(t, 100, 100));
    in.chunks.back().shard = t % 2;
    in.chunks.back().raw_bytes = 1000;
  }
  in.chunks[0].raw_bytes = 5000;  // At the threshold below: alone.
  in.transport_cpu.ms_per_message = 1;  // And nothing else costs.
  // Unfused: 6 calls per worker, each and its answer: 24 messages.
  EXPECT_DOUBLE_EQ(CpuWorkMs(in), 24);
  in.fusion_bytes = 5000;
  // Shard 0 holds chunks 4 and 2 (2000 bytes) and sends chunk 0 alone: 2 calls; shard 1
  // holds 5, 3, 1 (3000 bytes): 1 call. 3 calls per worker: 12 messages.
  EXPECT_DOUBLE_EQ(CpuWorkMs(in), 12);
  in.fusion_bytes = 2000;
  // Shard 0: {4, 2} reach 2000, then 0 alone; shard 1: {5, 3}, then {1} at the end: 4 calls.
  EXPECT_DOUBLE_EQ(CpuWorkMs(in), 16);
  // A later round goes alone.
  in.chunks[5].rounds.push_back(RoundCost{});
  EXPECT_DOUBLE_EQ(CpuWorkMs(in), 20);
  // Payloads as large as the threshold cut the batches too: shard 0 sends 4 and 2 alone.
  in.chunks[5].rounds.pop_back();
  in.chunks[4].rounds[0].push_bytes = 2000;
  in.chunks[2].rounds[0].push_bytes = 2000;
  EXPECT_DOUBLE_EQ(CpuWorkMs(in), 20);
}

TEST(CpuWorkMsTest, ComputeOffTheCpuIsLeftOut) {
  StepInputs in = CpuHeavyStep();
  in.compute_on_cpu = false;  // model.kind LAYOUT: the workers sleep through compute.
  // Workers 2 x (14 - 10), the shard 4.
  EXPECT_DOUBLE_EQ(CpuWorkMs(in), 12);
}

TEST(PredictStepTest, CpuBoundTakesOverWhenTheWorkExceedsCoresTimesTheTimeline) {
  StepInputs in = CpuHeavyStep();
  in.transport_cpu.ms_per_message = 0.5;
  in.transport_cpu.ms_per_byte = 0.001;  // 38 ms of CPU in all.
  // The timeline: compute 0-10, encode -12, the pushes on the link 12-13 and 13-14, the
  // shard decodes them 13-14 and 14-15, updates -17, the answers on the link 17-18 and
  // 18-19, the second worker decodes and applies -21.
  in.cores = 2;
  absl::StatusOr<StepPrediction> p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->timeline_ms, 21);
  EXPECT_DOUBLE_EQ(p->cpu_work_ms, 38);
  EXPECT_EQ(p->usable_cores, 2);
  EXPECT_DOUBLE_EQ(p->cpu_bound_ms, 19);
  EXPECT_DOUBLE_EQ(p->step_ms, 21);  // 38 ms of work fit in 2 cores x 21 ms.
  EXPECT_EQ(p->bound, Bound::kTimeline);

  // On one core the same work needs 38 ms: the CPU decides, and every part of the split
  // stretches by 38 / 21 so that they still add up to the step.
  in.cores = 1;
  p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->timeline_ms, 21);
  EXPECT_DOUBLE_EQ(p->step_ms, 38);
  EXPECT_EQ(p->bound, Bound::kCpu);
  EXPECT_DOUBLE_EQ(p->compute_ms, 10 * 38.0 / 21);
  EXPECT_DOUBLE_EQ(p->encode_ms, 2 * 38.0 / 21);
  EXPECT_DOUBLE_EQ(p->wire_ms, 7 * 38.0 / 21);
  EXPECT_NEAR(p->compute_ms + p->encode_ms + p->wire_ms + p->decode_ms + p->apply_ms, 38, 1e-9);

  // 64 cores: two workers and two shards keep only four busy (38 / 4 = 9.5 ms < 21).
  in.cores = 64;
  p = PredictStep(in);
  EXPECT_EQ(p->usable_cores, 4);
  EXPECT_DOUBLE_EQ(p->cpu_bound_ms, 9.5);
  EXPECT_DOUBLE_EQ(p->step_ms, 21);

  // No core count: no CPU bound at all.
  in.cores = 0;
  p = PredictStep(in);
  EXPECT_EQ(p->usable_cores, 0);
  EXPECT_DOUBLE_EQ(p->cpu_bound_ms, 0);
  EXPECT_DOUBLE_EQ(p->step_ms, 21);
}

// A job calibration (tools/tamp/job_calibration.h) adds its CPU per step and per payload
// byte to the work, divides the usable cores by its utilisation, and raises the
// transport's ceiling to the payload rate it saw.
TEST(PredictStepTest, JobCalibrationAddsCpuShrinksCoresAndRaisesTheCeiling) {
  StepInputs in = CpuHeavyStep();
  in.cores = 2;
  EXPECT_DOUBLE_EQ(PayloadBytesPerStep(in), 4000);
  in.job_cpu.ms_per_step = 6;
  in.job_cpu.ms_per_byte = 0.001;
  in.job_cpu.core_utilization = 0.8;
  absl::StatusOr<StepPrediction> p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->cpu_work_ms, 32 + 6 + 4000 * 0.001);
  EXPECT_DOUBLE_EQ(p->cpu_bound_ms, 42 / (2 * 0.8));
  EXPECT_DOUBLE_EQ(p->step_ms, 42 / (2 * 0.8));  // Above the 21 ms timeline.
  EXPECT_EQ(p->bound, Bound::kCpu);

  StepInputs unshaped;
  unshaped.tensor_ready_ms = {0};
  unshaped.chunks = {Chunk(0, 1000, 3000)};
  unshaped.link = Link{"unshaped", 0};
  unshaped.transport.max_bytes_per_ms = 1000;
  EXPECT_DOUBLE_EQ(PredictStep(unshaped)->step_ms, 4.0);
  unshaped.job_cpu.payload_bytes_per_ms = 2000;  // A run moved bytes twice as fast.
  EXPECT_DOUBLE_EQ(PredictStep(unshaped)->step_ms, 2.0);
  unshaped.job_cpu.payload_bytes_per_ms = 500;  // Slower than the ceiling: no change.
  EXPECT_DOUBLE_EQ(PredictStep(unshaped)->step_ms, 4.0);
  unshaped.job_cpu.core_utilization = 0;
  EXPECT_FALSE(PredictStep(unshaped).ok());
}

TEST(PredictStepTest, BoundNamesTheLinkWhenItCarriesMoreThanTheWorkersOwnWork) {
  StepInputs in = CpuHeavyStep();
  in.cores = 2;
  // 4 ms of link against 14 ms of a worker's own work: the timeline.
  EXPECT_EQ(PredictStep(in)->bound, Bound::kTimeline);
  // 100 kB each way: 400 ms of link.
  in.chunks[0].rounds[0].push_bytes = 100000;
  in.chunks[0].pull_bytes = 100000;
  absl::StatusOr<StepPrediction> p = PredictStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->link_busy_ms, 400);
  EXPECT_EQ(p->bound, Bound::kLink);
  EXPECT_EQ(BoundName(p->bound), "link");
}

TEST(PredictStepTest, RejectsInconsistentInputs) {
  StepInputs in;
  in.tensor_ready_ms = {0};
  in.chunks = {Chunk(3, 0, 0)};
  EXPECT_EQ(PredictStep(in).status().code(), absl::StatusCode::kInvalidArgument);
  in.chunks = {Chunk(0, 0, 0)};
  in.chunks[0].shard = 1;
  EXPECT_EQ(PredictStep(in).status().code(), absl::StatusCode::kInvalidArgument);
  in.chunks[0].shard = 0;
  in.chunks[0].rounds.clear();
  EXPECT_EQ(PredictStep(in).status().code(), absl::StatusCode::kInvalidArgument);
  in.chunks = {Chunk(0, 0, 0)};
  in.num_workers = 0;
  EXPECT_EQ(PredictStep(in).status().code(), absl::StatusCode::kInvalidArgument);
  in.num_workers = 1;
  in.chunks[0].decode_ms = -1;
  EXPECT_EQ(PredictStep(in).status().code(), absl::StatusCode::kInvalidArgument);
  in.chunks[0].decode_ms = 0;
  in.tensor_ready_ms = {5};  // After compute_ms (0).
  EXPECT_EQ(PredictStep(in).status().code(), absl::StatusCode::kInvalidArgument);
  in.tensor_ready_ms = {0};
  in.cores = -1;
  EXPECT_EQ(PredictStep(in).status().code(), absl::StatusCode::kInvalidArgument);
  in.cores = 1;
  in.transport_cpu.ms_per_byte = -1;
  EXPECT_EQ(PredictStep(in).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tamp::perf
