#include "tools/tamp/model_command.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "job/config.h"
#include "job/job_layout.h"
#include "proto/events.pb.h"
#include "tools/tamp/model_options.h"
#include "tools/tamp/summary.h"

namespace tamp::launcher {
namespace {

TEST(ParseModelArgsTest, ReadsEveryFlag) {
  absl::StatusOr<ModelOptions> options =
      ParseModelArgs({"job.pbtxt", "--bandwidth", "10gbit", "--topology=hosts", "--codecs=all", "--json",
                      "--compute_ms=7.5", "--latency_ms", "0", "--transport_gbit=12", "--cores=3",
                      "--job_cpu=5.5,7e-07,0.9,900000"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->config_path, "job.pbtxt");
  EXPECT_DOUBLE_EQ(options->link.bits_per_second, 1e10);
  EXPECT_EQ(options->topology, perf::Topology::kHosts);
  EXPECT_TRUE(options->all_codecs);
  EXPECT_TRUE(options->json);
  EXPECT_DOUBLE_EQ(*options->compute_ms, 7.5);
  EXPECT_DOUBLE_EQ(*options->latency_ms, 0);
  EXPECT_DOUBLE_EQ(*options->transport_gbit, 12);
  EXPECT_EQ(*options->cores, 3);
  EXPECT_FALSE(options->calibration_job);
  ASSERT_TRUE(options->job_cpu.has_value());
  EXPECT_DOUBLE_EQ(options->job_cpu->ms_per_step, 5.5);
  EXPECT_DOUBLE_EQ(options->job_cpu->ms_per_byte, 7e-07);
  EXPECT_DOUBLE_EQ(options->job_cpu->core_utilization, 0.9);
  EXPECT_DOUBLE_EQ(options->job_cpu->payload_bytes_per_ms, 9e5);

  options = ParseModelArgs({"--bandwidth=unshaped", "--calibration_job", "job.pbtxt"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->calibration_job);
  EXPECT_FALSE(options->job_cpu.has_value());

  options = ParseModelArgs({"--bandwidth=unshaped", "job.pbtxt"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->topology, perf::Topology::kShared);
  EXPECT_FALSE(options->all_codecs);
  EXPECT_FALSE(options->json);
  EXPECT_FALSE(options->compute_ms.has_value());
  EXPECT_FALSE(options->cores.has_value());
  EXPECT_FALSE(options->auto_plan);

  // --auto: the link defaults to the config's compression.automatic.bandwidth.
  options = ParseModelArgs({"job.pbtxt", "--auto"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_TRUE(options->auto_plan);
  EXPECT_FALSE(options->topology_given);
  EXPECT_EQ(options->write_config, "");

  options = ParseModelArgs({"job.pbtxt", "--auto", "--write_config=/tmp/resolved.pbtxt"});
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->write_config, "/tmp/resolved.pbtxt");
}

TEST(ParseModelArgsTest, ErrorsSayWhatIsWrong) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"job.pbtxt"}, "missing --bandwidth"},
      {{"--bandwidth=1gbit"}, "missing CONFIG"},
      {{"a.pbtxt", "b.pbtxt", "--bandwidth=1gbit"}, "got also \"b.pbtxt\""},
      {{"job.pbtxt", "--bandwidth=1gbps"}, "bandwidth \"1gbps\""},
      {{"job.pbtxt", "--bandwidth"}, "--bandwidth needs a value"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--topology=rack"}, "topology \"rack\": expected shared or hosts"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--codecs=some"}, "--codecs must be \"all\" or \"config\""},
      {{"job.pbtxt", "--bandwidth=1gbit", "--compute_ms=-3"}, "--compute_ms must be a positive"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--latency_ms=x"}, "--latency_ms must be a number"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--json=yes"}, "--json takes no value"},
      {{"job.pbtxt", "--auto=yes"}, "--auto takes no value"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--write_config=out.pbtxt"},
       "--write_config writes the config compression.automatic resolves to: add --auto"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--cores=0"}, "--cores must be a whole number >= 1"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--cores=1.5"}, "--cores must be a whole number >= 1"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--speed=3"}, "unknown flag --speed=3"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--calibration_job=1"}, "--calibration_job takes no value"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--job_cpu=1,2"}, "--job_cpu must be MS_PER_STEP,"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--job_cpu=1,0,1.5,0"}, "--job_cpu must be"},
      {{"job.pbtxt", "--bandwidth=1gbit", "--job_cpu=1,0,1,0", "--calibration_job"},
       "--job_cpu gives the calibration --calibration_job measures"},
      {{"job.pbtxt", "--auto", "--calibration_job", "--json"},
       "--json, --calibration_job have no effect with --auto"},
      {{"job.pbtxt", "--auto", "--codecs=all"}, "--codecs all has no effect with --auto"},
  };
  for (const auto& [args, message] : cases) {
    absl::StatusOr<ModelOptions> options = ParseModelArgs(args);
    ASSERT_FALSE(options.ok()) << message;
    EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(options.status().message().find(message), std::string::npos)
        << options.status().message();
  }
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ModelCommandTest, BadConfigIsAUsageErrorNamingTheField) {
  ModelOptions options;
  options.config_path = WriteFile("bad.pbtxt", "version: 1\ncluster { num_servers: 1 num_workers: 0 }\n");
  options.link = *perf::ParseBandwidth("1gbit");
  std::ostringstream out, err;
  EXPECT_EQ(ModelCommand(options, &out, &err), 2);
  EXPECT_NE(err.str().find("cluster.num_workers"), std::string::npos) << err.str();
  EXPECT_EQ(out.str(), "");
}

// A chunk its codec cannot take is the config's error (exit 2), as tamp run and the
// processes refuse it; it printed an error row and exited 0.
TEST(ModelCommandTest, AChunkItsCodecCannotTakeIsAUsageError) {
  ModelOptions options;
  options.config_path = WriteFile("rank.pbtxt", R"(version: 1
    cluster { num_servers: 1 num_workers: 2 }
    model { kind: MLP hidden: [16] }
    optimizer { name: "sgd" learning_rate: 0.1 }
    compression { default_compression { push { name: "powersgd" rank: 4 } } })");
  options.link = *perf::ParseBandwidth("1gbit");
  std::ostringstream out, err;
  EXPECT_EQ(ModelCommand(options, &out, &err), 2);
  EXPECT_NE(err.str().find("rank.pbtxt: chunk 3 (fc2.bias): push: codec 'powersgd': rank 4"),
            std::string::npos)
      << err.str();
  EXPECT_EQ(out.str(), "");
}

// Every codec, for a config with an override: the table says the override stays.
TEST(ModelCommandTest, EveryCodecSaysTheOverridesStay) {
  ModelOptions options;
  options.config_path = WriteFile("overridden.pbtxt", R"(version: 1
    cluster { num_servers: 1 num_workers: 1 }
    model { kind: MLP hidden: [16] }
    data { batch_size: 8 }
    optimizer { name: "sgd" learning_rate: 0.1 }
    compression { tensor_overrides { pattern: "fc1.*" compression { push { name: "fp16" } } } })");
  options.link = *perf::ParseBandwidth("1gbit");
  options.cores = 2;
  options.compute_ms = 1.0;
  options.all_codecs = true;
  std::ostringstream out, err;
  ASSERT_EQ(ModelCommand(options, &out, &err), 0) << err.str();
  EXPECT_NE(out.str().find("Each codec's row swaps default_compression's push only: the "
                           "config's 1 override stays as written"),
            std::string::npos)
      << out.str();
}

// The config's own row, for a config with overrides: its PUSH names the default's codec and
// says that overrides come with it (the prediction is for the config whole); a row without
// overrides names the codec alone.
TEST(ModelCommandTest, TheConfigRowSaysItsOverrides) {
  const std::string header = R"(version: 1
    cluster { num_servers: 1 num_workers: 1 }
    model { kind: MLP hidden: [16] }
    data { batch_size: 8 }
    optimizer { name: "sgd" learning_rate: 0.1 }
    compression { default_compression { push { name: "topk" ratio: 0.1 } } )";
  for (const auto& [overrides, expected] : std::vector<std::pair<std::string, std::string>>{
           {"", "name: \"topk\" ratio: 0.1\n"},
           {R"(tensor_overrides { pattern: "fc1.*" compression { push { name: "fp16" } } }
               tensor_overrides { pattern: "*.bias" compression { push { name: "none" } } })",
            "name: \"topk\" ratio: 0.1 + 2 overrides\n"}}) {
    ModelOptions options;
    options.config_path = WriteFile("config_row.pbtxt", header + overrides + "}");
    options.link = *perf::ParseBandwidth("1gbit");
    options.cores = 2;
    options.compute_ms = 1.0;
    std::ostringstream out, err;
    ASSERT_EQ(ModelCommand(options, &out, &err), 0) << err.str();
    const std::string text = out.str();
    const size_t row = text.find("\nconfig ");
    ASSERT_NE(row, std::string::npos) << text;
    const size_t end = text.find('\n', row + 1);
    EXPECT_EQ(text.substr(end - expected.size() + 1, expected.size()), expected)
        << text.substr(row, end - row);
  }
}

TEST(ModelCommandTest, ABusyMachineIsSaid) {
  EXPECT_EQ(BusyMachineNote(1.5, 2), "");
  EXPECT_EQ(BusyMachineNote(0.0, 1), "");
  EXPECT_NE(BusyMachineNote(4.25, 2).find("the load average is 4.2 on 2 cores: other work "
                                          "shares them"),
            std::string::npos)
      << BusyMachineNote(4.25, 2);
  EXPECT_NE(BusyMachineNote(2, 2), "");
}

TEST(ModelCommandTest, AThresholdCodecsBytesAreSaidToBeOneGradients) {
  absl::StatusOr<config::RunConfig> config = LoadConfigText(R"pb(
    version: 1
    cluster { num_servers: 1 num_workers: 1 }
    model { kind: MLP hidden: [ 8 ] }
    data { batch_size: 4 }
    training { epochs: 1 }
    optimizer { learning_rate: 0.1 }
    compression {
      default_compression { push { name: "topk" ratio: 0.1 } }
      tensor_overrides {
        pattern: "fc2.weight"
        compression { push { name: "threshold" threshold: 0.01 } }
      }
    }
  )pb", "test");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<JobLayout> layout = BuildJobLayout(*config);
  ASSERT_TRUE(layout.ok()) << layout.status();
  const std::string note = DataDependentBytesNote(*layout);
  EXPECT_NE(note.find("the threshold codec (fc2.weight) sends every entry above its threshold"),
            std::string::npos) << note;
  config->mutable_compression()->clear_tensor_overrides();
  layout = BuildJobLayout(*config);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(DataDependentBytesNote(*layout), "");
}

TEST(ModelCommandTest, AutoNeedsAnAutomaticBlock) {
  ModelOptions options;
  options.config_path = WriteFile("plain.pbtxt", R"(version: 1
    cluster { num_servers: 1 num_workers: 2 }
    model { kind: MLP hidden: [16] }
    optimizer { name: "sgd" learning_rate: 0.1 })");
  options.auto_plan = true;
  std::ostringstream out, err;
  EXPECT_EQ(ModelCommand(options, &out, &err), 2);
  EXPECT_NE(err.str().find("--auto needs a compression.automatic block"), std::string::npos)
      << err.str();
}

// The automatic block of a small MLP: none, fp16 and top-k 1% with memory, the candidates of
// bench/configs/auto/mlp.pbtxt (the convergence table accepts them).
constexpr char kAutoConfig[] = R"(version: 1
    cluster { num_servers: 1 num_workers: 2 }
    model { kind: MLP hidden: [256] }
    optimizer { name: "sgd" learning_rate: 0.1 }
    compression {
      min_compress_bytes: 4096
      automatic {
        bandwidth: "1gbit"
        candidates { push { name: "none" } }
        candidates { push { name: "fp16" } }
        candidates { push { name: "topk" ratio: 0.01 } push_feedback { kind: RESIDUAL } }
      }
    })";

TEST(ModelCommandTest, AutoWritesTheResolvedConfigThatServersAndWorkersLoad) {
  ModelOptions options;
  options.config_path = WriteFile("auto.pbtxt", kAutoConfig);
  options.auto_plan = true;
  options.link = *perf::ParseBandwidth("10gbit");
  options.write_config = std::string(getenv("TEST_TMPDIR")) + "/resolved.pbtxt";
  std::ostringstream out, err;
  ASSERT_EQ(ModelCommand(options, &out, &err), 0) << err.str();
  EXPECT_NE(out.str().find("resolved config: " + options.write_config), std::string::npos)
      << out.str();

  std::ifstream file(options.write_config);
  std::string first_line;
  std::getline(file, first_line);
  EXPECT_EQ(first_line,
            "# compression.automatic resolved by tamp model --auto on 10gbit, one shared link "
            "(docs/auto.md)");
  absl::StatusOr<config::RunConfig> resolved = LoadConfigFile(options.write_config);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_FALSE(resolved->compression().has_automatic());
  EXPECT_TRUE(resolved->compression().has_default_compression());
  // What tamp_server and tamp_worker build from it: every chunk has one of the candidates.
  absl::StatusOr<JobLayout> layout = BuildJobLayout(*resolved);
  ASSERT_TRUE(layout.ok()) << layout.status();
  for (const auto& chunk : layout->chunks) {
    const std::string& push = chunk.compression.push().name();
    EXPECT_TRUE(push == "none" || push == "fp16" || push == "topk") << push;
  }
}

// A candidate whose codecs cannot take a tensor (powersgd rank 2 on a one-row tensor) leaves
// that tensor on candidate 0 and is still planned for the others.
TEST(ModelCommandTest, AutoLeavesATensorACandidateCannotTakeOnCandidateZero) {
  const std::string dir = getenv("TEST_TMPDIR");
  WriteFile("rows.layout", "tamp-layout 1\nrow.weight 1 20000\nw.weight 512 512\n");
  WriteFile("rows.profile", "tamp-profile 1\nscale 1\nlayer 1 2 row.weight\nlayer 1 2 w.weight\n");
  ModelOptions options;
  options.config_path = WriteFile("rows.pbtxt", R"(version: 1
    cluster { num_servers: 1 num_workers: 2 }
    model { kind: LAYOUT layout_file: "rows.layout" profile_file: "rows.profile" }
    training { max_steps: 10 }
    optimizer { name: "sgd" learning_rate: 0.1 }
    compression {
      min_compress_bytes: 4096
      automatic {
        bandwidth: "100mbit"
        candidates { push { name: "none" } }
        candidates { push { name: "powersgd" rank: 2 } push_feedback { kind: RESIDUAL } }
      }
    })");
  options.auto_plan = true;
  options.write_config = dir + "/rows_resolved.pbtxt";
  std::ostringstream out, err;
  ASSERT_EQ(ModelCommand(options, &out, &err), 0) << err.str();
  EXPECT_NE(out.str().find("candidate 1 does not fit tensor row.weight (chunk 0 (row.weight): "
                           "push: codec 'powersgd': rank 2 needs a matrix of at least 2 x 2"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("): the plan never gives it candidate 1, whose ALL ON IT figure "
                           "counts it on candidate 0\n"),
            std::string::npos)
      << out.str();
  absl::StatusOr<config::RunConfig> resolved = LoadConfigFile(options.write_config);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  absl::StatusOr<JobLayout> layout = BuildJobLayout(*resolved);
  ASSERT_TRUE(layout.ok()) << layout.status();
  for (const auto& chunk : layout->chunks) {
    const std::string& name = layout->tensor_of(chunk).name;
    // At 100 Mbit/s the 1 MiB matrix goes compressed; the row cannot.
    EXPECT_EQ(chunk.compression.push().name(), name == "row.weight" ? "none" : "powersgd")
        << name;
  }
}

TEST(ModelCommandTest, AutoThatCannotWriteItsConfigFailsNamingThePath) {
  ModelOptions options;
  options.config_path = WriteFile("auto.pbtxt", kAutoConfig);
  options.auto_plan = true;
  options.write_config = std::string(getenv("TEST_TMPDIR")) + "/no/such/dir/resolved.pbtxt";
  std::ostringstream out, err;
  EXPECT_EQ(ModelCommand(options, &out, &err), 2);
  EXPECT_NE(err.str().find(options.write_config), std::string::npos) << err.str();
}

TEST(ModelCommandTest, RefusesConsistencyOtherThanSync) {
  ModelOptions options;
  options.config_path = WriteFile("ssp.pbtxt", R"(version: 1
    cluster { num_servers: 1 num_workers: 2 }
    model { kind: MLP hidden: [16] }
    optimizer { name: "sgd" learning_rate: 0.1 }
    consistency { mode: SSP staleness: 2 })");
  options.link = *perf::ParseBandwidth("1gbit");
  std::ostringstream out, err;
  EXPECT_EQ(ModelCommand(options, &out, &err), 2);
  EXPECT_NE(err.str().find("consistency.mode: the model predicts SYNC steps only, got SSP"),
            std::string::npos) << err.str();
}

// A GPU config is predicted, saying in one line that its compute and encode are the CPU's.
TEST(ModelCommandTest, SaysAGpuConfigIsPredictedWithTheCpuModel) {
  ModelOptions options;
  options.config_path = WriteFile("gpu.pbtxt", R"(version: 1
    device: CUDA
    cluster { num_servers: 1 num_workers: 1 }
    model { kind: MLP hidden: [16] }
    data { batch_size: 8 }
    optimizer { name: "sgd" learning_rate: 0.1 })");
  options.link = *perf::ParseBandwidth("1gbit");
  options.cores = 2;
  std::ostringstream out, err;
  ASSERT_EQ(ModelCommand(options, &out, &err), 0) << err.str();
  EXPECT_NE(err.str().find("device: CUDA: predicted with this machine's CPU model and CPU "
                           "codecs"),
            std::string::npos)
      << err.str();
  EXPECT_FALSE(out.str().empty());
  options.config_path = WriteFile("cpu.pbtxt", R"(version: 1
    cluster { num_servers: 1 num_workers: 1 }
    model { kind: MLP hidden: [16] }
    data { batch_size: 8 }
    optimizer { name: "sgd" learning_rate: 0.1 })");
  std::ostringstream cpu_out, cpu_err;
  ASSERT_EQ(ModelCommand(options, &cpu_out, &cpu_err), 0) << cpu_err.str();
  EXPECT_EQ(cpu_err.str().find("device: CUDA"), std::string::npos) << cpu_err.str();
}

TEST(ModelCommandTest, PredictsNoneAndTheConfigsCodecAsJson) {
  ModelOptions options;
  options.config_path = WriteFile("small.pbtxt", R"(version: 1
    cluster { num_servers: 2 num_workers: 2 }
    model { kind: MLP hidden: [64] }
    data { batch_size: 16 }
    optimizer { name: "sgd" learning_rate: 0.1 }
    compression {
      partition_bytes: 65536
      min_compress_bytes: 1024
      default_compression { push { name: "topk" ratio: 0.01 } push_feedback { kind: RESIDUAL } }
    })");
  // A slow link, so bytes decide: top-k must come out faster than none.
  options.link = *perf::ParseBandwidth("100mbit");
  options.cores = 2;
  options.json = true;
  std::ostringstream out, err;
  ASSERT_EQ(ModelCommand(options, &out, &err), 0) << err.str();
  // One line of JSON, an events::ModelPrediction that protobuf's parser reads back.
  const std::string json = out.str();
  ASSERT_EQ(json.find('\n'), json.size() - 1) << json;
  events::ModelPrediction prediction;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &prediction).ok()) << json;
  EXPECT_EQ(prediction.format_version(), kJsonFormatVersion);
  EXPECT_EQ(prediction.link(), "100mbit");
  EXPECT_EQ(prediction.topology(), "shared");
  // The transport's CPU cost is measured (the probe), the cores given here.
  EXPECT_GT(prediction.transport().cpu_ms_per_message(), 0) << json;
  EXPECT_EQ(prediction.cores(), 2);
  ASSERT_EQ(prediction.codecs_size(), 2) << json;
  const events::ModelPrediction::Codec& none = prediction.codecs(0);
  const events::ModelPrediction::Codec& topk = prediction.codecs(1);
  EXPECT_EQ(none.codec(), "none");
  EXPECT_EQ(none.push(), "name: \"none\"");
  EXPECT_EQ(topk.codec(), "config");
  EXPECT_EQ(topk.push(), "name: \"topk\" ratio: 0.01");
  EXPECT_FALSE(none.has_error() || topk.has_error()) << json;
  // At 100 Mbit/s none's fp32 bytes (~0.8 MB per step) take ~65 ms of link, far more than
  // the small MLP's compute: the link decides.
  EXPECT_EQ(none.bound(), "link") << json;
  // none's speedup over itself is exactly 1; top-k's bytes are far fewer.
  EXPECT_EQ(none.speedup_vs_none(), 1) << json;
  EXPECT_GT(topk.speedup_vs_none(), 1.2) << json;
  // The names bench/model_vs_measured.py and bench/scaling.sh read, snake_case as ever.
  for (const char* name :
       {"config", "link", "bits_per_second", "topology", "workers", "servers",
        "measured_compute_ms", "transport", "message_latency_ms", "cpu_ms_per_byte", "cores",
        "job_cpu", "calibrated", "ms_per_step", "ms_per_byte", "core_utilization",
        "payload_bytes_per_ms", "codecs", "codec", "push", "step_ms", "bound", "timeline_ms",
        "cpu_work_ms", "wire_ms", "bytes_pushed_per_step", "bytes_pulled_per_step",
        "speedup_vs_none"}) {
    EXPECT_NE(json.find(absl::StrCat("\"", name, "\":")), std::string::npos) << name;
  }
  // A predicted row has no error field (scripts test for it).
  EXPECT_EQ(json.find("\"error\""), std::string::npos) << json;
}

}  // namespace
}  // namespace tamp::launcher
