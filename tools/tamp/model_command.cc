#include "tools/tamp/model_command.h"

#include <algorithm>
#include <optional>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/cpu_time.h"
#include "base/proto_json.h"
#include "base/status_macros.h"
#include "compress/registry.h"
#include "google/protobuf/text_format.h"
#include "job/chunk_codecs.h"
#include "job/config.h"
#include "job/job_layout.h"
#include "proto/events.pb.h"
#include "tools/tamp/auto_command.h"
#include "tools/tamp/binaries.h"
#include "tools/tamp/job.h"
#include "tools/tamp/job_calibration.h"
#include "tools/tamp/perf_calibrate.h"
#include "tools/tamp/summary.h"
#include "tools/tamp/table.h"
#include "tools/tamp/transport_probe.h"

namespace tamp::launcher {
namespace {

// Timed forward/backward steps per model copy, and repetitions per codec measurement: enough
// for stable medians in well under a second per codec on the example MLP.
constexpr int kComputeSteps = 10;
constexpr int kCodecRepetitions = 5;

// One job to predict: the config with one compression choice.
struct Variant {
  std::string codec;  // Name of the push codec ("config" compression: the config's own).
  std::string spec;   // The push spec, one line of text format.
  config::RunConfig config;
};

std::string OneLine(const google::protobuf::Message& message) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string text;
  printer.PrintToString(message, &text);
  return std::string(absl::StripTrailingAsciiWhitespace(text));
}

// The job without any compression: the reference every speedup is against.
config::RunConfig Uncompressed(const config::RunConfig& config) {
  config::RunConfig none = config;
  config::Compression& compression = *none.mutable_compression();
  compression.clear_shard_overrides();
  compression.clear_tensor_overrides();
  compression.clear_clip_norm();
  config::ChunkCompression& chunk = *compression.mutable_default_compression();
  chunk.Clear();
  chunk.mutable_push()->set_name("none");
  chunk.mutable_pull()->set_name("none");
  return none;
}

// A row's figures: `p`, and its speedup over none's `none_ms` (0 without one).
void SetFigures(const perf::StepPrediction& p, double none_ms,
                events::ModelPrediction::Codec* row) {
  row->set_step_ms(p.step_ms);
  row->set_bound(std::string(perf::BoundName(p.bound)));
  row->set_timeline_ms(p.timeline_ms);
  row->set_cpu_work_ms(p.cpu_work_ms);
  row->set_cpu_bound_ms(p.cpu_bound_ms);
  row->set_usable_cores(p.usable_cores);
  row->set_compute_ms(p.compute_ms);
  row->set_encode_ms(p.encode_ms);
  row->set_wire_ms(p.wire_ms);
  row->set_decode_ms(p.decode_ms);
  row->set_apply_ms(p.apply_ms);
  row->set_server_ms(p.server_ms);
  row->set_link_busy_ms(p.link_busy_ms);
  row->set_bytes_pushed_per_step(p.push_bytes);
  row->set_bytes_pulled_per_step(p.pull_bytes);
  row->set_speedup_vs_none(p.step_ms > 0 ? none_ms / p.step_ms : 0.0);
}

absl::string_view TopologyName(perf::Topology topology) {
  return topology == perf::Topology::kShared ? "shared" : "hosts";
}

std::string Ms(double ms) { return absl::StrFormat("%.2f", ms); }

// Steps of the calibration runs (tools/tamp/job_calibration.h): the difference of the two
// is what is measured.
constexpr int kCalibrationShortSteps = 20;
constexpr int kCalibrationLongSteps = 80;

// --calibration_job: runs `config` and `uncompressed` (its twin with no compression, which
// moves the most bytes) briefly on loopback and fits what the model's CPU work misses, from
// the inputs the model already has for each.
absl::StatusOr<perf::JobCpuCalibration> CalibrateWithJobs(
    const config::RunConfig& config, const absl::StatusOr<perf::StepInputs>& config_inputs,
    const config::RunConfig& uncompressed,
    const absl::StatusOr<perf::StepInputs>& uncompressed_inputs, int cores) {
  TAMP_ASSIGN_OR_RETURN(const std::string server_binary,
                        FindBinary(ProcessBinaryLookup("--server_binary", "", "TAMP_SERVER_BINARY",
                                                       "server/tamp_server")));
  TAMP_ASSIGN_OR_RETURN(const std::string worker_binary,
                        FindBinary(ProcessBinaryLookup("--worker_binary", "", "TAMP_WORKER_BINARY",
                                                       "worker/tamp_worker")));
  std::vector<CalibrationRun> runs;
  int usable_cores = 0;
  for (const auto& [job, inputs] : {std::pair{&config, &config_inputs},
                                    std::pair{&uncompressed, &uncompressed_inputs}}) {
    if (!inputs->ok()) return inputs->status();
    usable_cores = std::min(cores, (*inputs)->num_workers + (*inputs)->num_shards);
    CalibrationRun run;
    run.counted_cpu_ms = perf::CpuWorkMs(**inputs);
    run.payload_bytes = perf::PayloadBytesPerStep(**inputs);
    TAMP_ASSIGN_OR_RETURN(run.measured, MeasureJobCpu(*job, server_binary, worker_binary,
                                                      kCalibrationShortSteps,
                                                      kCalibrationLongSteps));
    runs.push_back(run);
  }
  return FitJobCpu(runs, usable_cores);
}

// `tamp model CONFIG --auto`: the plan of compression.automatic, on the block's link unless
// --bandwidth / --topology say otherwise.
int AutoPlanCommand(const ModelOptions& options, const config::RunConfig& config,
                    std::ostream* out, std::ostream* err) {
  auto fail = [&](const absl::Status& status) {
    *err << "tamp model: " << status.message() << "\n";
    return kExitUsage;
  };
  if (!config.compression().has_automatic()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        options.config_path, ": --auto needs a compression.automatic block (docs/auto.md)")));
  }
  absl::StatusOr<perf::Link> link = AutoLink(config.compression().automatic());
  if (!link.ok()) return fail(link.status());
  absl::StatusOr<perf::Topology> topology = AutoTopology(config.compression().automatic());
  if (!topology.ok()) return fail(topology.status());
  if (!options.link.name.empty()) *link = options.link;
  if (options.topology_given) *topology = options.topology;
  absl::StatusOr<AutoResult> result =
      ResolveAutomatic(config, *link, *topology, options.cores.value_or(AvailableCores()));
  if (!result.ok()) return fail(result.status());
  *out << FormatPlan(config, *result, *link);
  if (!options.write_config.empty()) {
    // Planned for --bandwidth / --topology when given: the file says so in its block.
    if (absl::Status written = WriteResolvedConfig(
            *result, options.write_config,
            absl::StrCat("tamp model --auto on ", link->name, ", ",
                         perf::DescribeTopology(*topology)));
        !written.ok()) {
      return fail(written);
    }
    *out << "resolved config: " << options.write_config << "\n";
  }
  return kExitOk;
}

}  // namespace

// What the threshold codec's bytes here are: it sends as many entries as the gradient has
// above the threshold, and the model counts those of its one gradient.
constexpr char kOneGradientsBytes[] =
    "sends every entry above its threshold, as many as the gradients have: its bytes here are "
    "those of one gradient at the initial weights (random images, empty residuals), and a "
    "run's gradients may hold far fewer or more such entries, so its MB/step and times can be "
    "far from a run's (tamp run measures them)";

std::string DataDependentBytesNote(const JobLayout& layout) {
  std::vector<std::string> tensors;
  for (const ChunkPlan& plan : layout.chunks) {
    const bool threshold = plan.compression.push().name() == "threshold" ||
                           plan.compression.pull().name() == "threshold";
    const std::string& name = layout.tensor_of(plan).name;
    if (threshold && (tensors.empty() || tensors.back() != name)) tensors.push_back(name);
  }
  if (tensors.empty()) return "";
  return absl::StrCat("the threshold codec (", absl::StrJoin(tensors, ", "), ") ",
                      kOneGradientsBytes);
}

std::string BusyMachineNote(double load_average, int cores) {
  if (load_average < cores) return "";
  return absl::StrFormat(
      "the load average is %.1f on %d cores: other work shares them, so the compute and codec "
      "times measured now, and the predictions, come out higher than on an idle machine and "
      "vary between runs (predict where the job will run, when it is idle, or give "
      "--compute_ms)",
      load_average, cores);
}

int ModelCommand(const ModelOptions& options, std::ostream* out, std::ostream* err) {
  auto fail = [&](const absl::Status& status) {
    *err << "tamp model: " << status.message() << "\n";
    return kExitUsage;
  };
  std::vector<std::string> notes;
  absl::StatusOr<config::RunConfig> config = LoadConfigFile(options.config_path, &notes);
  if (!config.ok()) return fail(config.status());
  for (const std::string& note : notes) *err << "tamp model: note: " << note << "\n";
  if (absl::Status codecs = CheckChunkCodecs(*config); !codecs.ok()) {
    return fail(absl::Status(codecs.code(),
                             absl::StrCat(options.config_path, ": ", codecs.message())));
  }
  if (config->consistency().mode() != config::Consistency::SYNC) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        options.config_path, ": consistency.mode: the model predicts SYNC steps only, got ",
        config::Consistency::Mode_Name(config->consistency().mode()))));
  }
  if (config->device() == config::CUDA) {
    // Said, not refused: the link and server parts still hold, and --compute_ms can stand
    // in for the GPU's compute.
    *err << "tamp model: note: " << options.config_path
         << ": device: CUDA: predicted with this machine's CPU model and CPU codecs; a GPU "
            "worker's compute and encode are not modelled (--compute_ms sets the compute "
            "part, e.g. from tamp run's compute column on the GPU)\n";
  }
  if (const std::optional<double> load = LoadAverage(); load.has_value()) {
    const std::string busy = BusyMachineNote(*load, AvailableCores());
    if (!busy.empty()) *err << "tamp model: note: " << busy << "\n";
  }
  if (options.auto_plan) return AutoPlanCommand(options, *config, out, err);
  if (config->compression().has_automatic()) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        options.config_path, ": compression.automatic: add --auto to see its plan")));
  }
  absl::StatusOr<JobLayout> layout = BuildJobLayout(*config);
  if (!layout.ok()) return fail(layout.status());
  if (const std::string note = DataDependentBytesNote(*layout); !note.empty()) {
    *err << "tamp model: note: " << options.config_path << ": " << note << "\n";
  } else if (options.all_codecs) {  // The threshold row is the config with threshold.
    *err << "tamp model: note: the threshold row " << kOneGradientsBytes << "\n";
  }
  const int workers = static_cast<int>(config->cluster().num_workers());

  // Compute, measured once: as many model copies at once as the job has workers.
  absl::StatusOr<perf::ComputeProfile> compute =
      perf::MeasureCompute(*config, *layout, std::min(workers, 64), kComputeSteps);
  if (!compute.ok()) return fail(compute.status());
  const double measured_compute_ms = compute->step_ms;
  if (options.compute_ms.has_value() && compute->step_ms > 0) {
    const double scale = *options.compute_ms / compute->step_ms;
    for (double& ready : compute->tensor_ready_ms) ready *= scale;
    compute->step_ms = *options.compute_ms;
  }
  perf::Transport transport = perf::FittedTransport();
  if (options.latency_ms.has_value()) transport.message_latency_ms = *options.latency_ms;
  if (options.transport_gbit.has_value()) transport.max_bytes_per_ms = *options.transport_gbit * 1e9 / 8e3;
  // gRPC's own CPU per message and byte, measured now like the rest: the job's processes
  // pay it on the cores they share with their compute.
  absl::StatusOr<perf::TransportCpu> transport_cpu = perf::MeasureTransportCpu();
  if (!transport_cpu.ok()) return fail(transport_cpu.status());
  const int cores = options.cores.value_or(AvailableCores());

  std::vector<Variant> variants = {{"none", "name: \"none\"", Uncompressed(*config)}};
  if (!options.all_codecs) {
    variants.push_back({"config", OneLine(config->compression().default_compression().push()),
                        *config});
  } else {
    for (const compress::CodecInfo& info : compress::ListCodecs()) {
      if (info.id == compress::CodecId::kNone) continue;  // The first row already.
      config::RunConfig swapped = *config;
      *swapped.mutable_compression()->mutable_default_compression()->mutable_push() = info.example;
      variants.push_back({info.name, OneLine(info.example), std::move(swapped)});
    }
  }

  // Each variant's inputs: its codecs' costs measured on the measured gradient.
  auto inputs_for = [&](const config::RunConfig& variant) -> absl::StatusOr<perf::StepInputs> {
    TAMP_RETURN_IF_ERROR(ValidateConfig(variant));
    TAMP_ASSIGN_OR_RETURN(const JobLayout variant_layout, BuildJobLayout(variant));
    perf::StepInputs inputs;
    TAMP_ASSIGN_OR_RETURN(inputs.chunks, perf::MeasureChunkCosts(variant, variant_layout,
                                                                 compute->gradient,
                                                                 kCodecRepetitions));
    inputs.num_workers = workers;
    inputs.num_shards = static_cast<int>(config->cluster().num_servers());
    inputs.fusion_bytes = config->cluster().fusion_bytes();
    inputs.compute_ms = compute->step_ms;
    inputs.compute_on_cpu = compute->on_cpu;
    inputs.tensor_ready_ms = compute->tensor_ready_ms;
    inputs.link = options.link;
    inputs.topology = options.topology;
    inputs.transport = transport;
    inputs.cores = cores;
    inputs.transport_cpu = *transport_cpu;
    return inputs;
  };
  // Each variant's inputs, measured once; variants[0] is the uncompressed twin.
  std::vector<absl::StatusOr<perf::StepInputs>> inputs;
  for (const Variant& variant : variants) inputs.push_back(inputs_for(variant.config));
  perf::JobCpuCalibration job_cpu = options.job_cpu.value_or(perf::JobCpuCalibration{});
  if (options.calibration_job && config->model().kind() == config::Model::REGISTERED) {
    return fail(absl::InvalidArgumentError(
        "--calibration_job runs the job with tamp_worker, which has no model of kind "
        "REGISTERED (the workers' own): leave it out, or calibrate a LAYOUT config of the "
        "same layout_file and profile_file"));
  }
  if (options.calibration_job) {
    // The config's own compression is variants[1], except with --codecs all.
    const absl::StatusOr<perf::StepInputs> own =
        options.all_codecs ? inputs_for(*config) : inputs[1];
    absl::StatusOr<perf::JobCpuCalibration> fitted =
        CalibrateWithJobs(*config, own, variants[0].config, inputs[0], cores);
    if (!fitted.ok()) return fail(fitted.status());
    job_cpu = *fitted;
  }

  events::ModelPrediction prediction;
  prediction.set_format_version(kJsonFormatVersion);
  prediction.set_config(options.config_path);
  prediction.set_link(options.link.name);
  prediction.set_bits_per_second(options.link.bits_per_second);
  prediction.set_topology(std::string(TopologyName(options.topology)));
  prediction.set_workers(workers);
  prediction.set_servers(config->cluster().num_servers());
  prediction.set_measured_compute_ms(measured_compute_ms);
  events::ModelPrediction::Transport& transport_json = *prediction.mutable_transport();
  transport_json.set_message_latency_ms(transport.message_latency_ms);
  transport_json.set_message_overhead_bytes(transport.message_overhead_bytes);
  transport_json.set_max_bytes_per_ms(transport.max_bytes_per_ms);
  transport_json.set_cpu_ms_per_message(transport_cpu->ms_per_message);
  transport_json.set_cpu_ms_per_byte(transport_cpu->ms_per_byte);
  prediction.set_cores(cores);
  const bool calibrated = options.calibration_job || options.job_cpu.has_value();
  events::ModelPrediction::JobCpu& job_cpu_json = *prediction.mutable_job_cpu();
  job_cpu_json.set_calibrated(calibrated);
  job_cpu_json.set_ms_per_step(job_cpu.ms_per_step);
  job_cpu_json.set_ms_per_byte(job_cpu.ms_per_byte);
  job_cpu_json.set_core_utilization(job_cpu.core_utilization);
  job_cpu_json.set_payload_bytes_per_ms(job_cpu.payload_bytes_per_ms);

  // variants[0] is none: the speedups' reference, so predicted first.
  double none_ms = 0;
  for (size_t i = 0; i < variants.size(); ++i) {
    events::ModelPrediction::Codec& row = *prediction.add_codecs();
    row.set_codec(variants[i].codec);
    row.set_push(variants[i].spec);
    absl::Status status = inputs[i].status();
    if (status.ok()) {
      inputs[i]->job_cpu = job_cpu;
      absl::StatusOr<perf::StepPrediction> predicted = perf::PredictStep(*inputs[i]);
      if (predicted.ok()) {
        if (i == 0) none_ms = predicted->step_ms;
        SetFigures(*predicted, none_ms, &row);
      }
      status = predicted.status();
    }
    if (!status.ok()) row.set_error(std::string(status.message()));
  }

  // The config's own row failing is the command failing (the other rows are alternatives).
  int exit_code = kExitOk;
  for (const events::ModelPrediction::Codec& row : prediction.codecs()) {
    if (row.codec() == "config" && row.has_error()) exit_code = 1;
  }
  if (options.json) {
    *out << ProtoToJson(prediction) << "\n";
    return exit_code;
  }

  *out << absl::StrFormat(
      "%s on %s (%s): %d workers, %d servers; forward/backward %.2f ms %s%s; transport "
      "ceiling %.2f Gbit/s; gRPC CPU %.1f us per message + %.2f ns per byte (measured); %d "
      "cores%s\n\n",
      options.config_path, options.link.name,
      perf::DescribeTopology(options.topology),
      workers, config->cluster().num_servers(), measured_compute_ms,
      compute->on_cpu ? absl::StrFormat("measured (%d copies at once)", std::min(workers, 64))
                      : std::string("from model.profile_file"),
      options.compute_ms.has_value() ? absl::StrFormat(", %.2f ms given", *options.compute_ms)
                                     : "",
      transport.max_bytes_per_ms * 8e3 / 1e9, transport_cpu->ms_per_message * 1e3,
      transport_cpu->ms_per_byte * 1e6, cores,
      calibrated
          ? absl::StrFormat("; job calibration: +%.2f ms CPU per step + %.2f ns per byte, cores "
                            "%.0f%% busy, %.2f Gbit/s seen",
                            job_cpu.ms_per_step, job_cpu.ms_per_byte * 1e6,
                            100 * job_cpu.core_utilization,
                            job_cpu.payload_bytes_per_ms * 8e3 / 1e9)
          : "");
  const config::Compression& compression = config->compression();
  const int overrides = compression.shard_overrides_size() + compression.tensor_overrides_size();
  // The "config" row predicts the config whole, its overrides included: its PUSH says so, so
  // that the default's codec alone is not read as what every tensor gets.
  const std::string overrides_note =
      overrides == 0 ? ""
                     : absl::StrCat(" + ", overrides, overrides == 1 ? " override" : " overrides");
  std::vector<std::vector<std::string>> table;
  for (const events::ModelPrediction::Codec& row : prediction.codecs()) {
    if (row.has_error()) {
      table.push_back({row.codec(), "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
                       "error: " + row.error()});
      continue;
    }
    table.push_back(
        {row.codec(), Ms(row.step_ms()), row.bound(), Ms(row.cpu_work_ms()),
         Ms(row.compute_ms()), Ms(row.encode_ms()), Ms(row.wire_ms()), Ms(row.decode_ms()),
         Ms(row.apply_ms()),
         absl::StrFormat("%.3f", (row.bytes_pushed_per_step() + row.bytes_pulled_per_step()) / 1e6),
         absl::StrFormat("%.2fx", row.speedup_vs_none()),
         row.codec() == "config" ? row.push() + overrides_note : row.push()});
  }
  *out << FormatTable({"CODEC", "STEP MS", "BOUND", "CPU MS", "COMPUTE", "ENCODE", "WIRE",
                       "DECODE", "APPLY", "MB/STEP", "VS NONE", "PUSH"},
                      table, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40});
  *out << "\nms per step; BOUND: what decided the step (the busiest link, the timeline of "
          "compute, codecs and shards, or the CPU: CPU MS, the whole job's CPU work per step, "
          "over the usable cores); MB/STEP: payload bytes of all workers, both directions. "
          "Row \"none\": no compression at all.\n";
  if (options.all_codecs && overrides > 0) {
    *out << "Each codec's row swaps default_compression's push only: the config's " << overrides
         << (overrides == 1 ? " override stays" : " overrides stay")
         << " as written, so the tensors they match keep their codecs in every row.\n";
  }
  return exit_code;
}

}  // namespace tamp::launcher
