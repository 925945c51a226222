// _tamp: the Python extension over tamp::Client (python/tamp/__init__.py is its public face;
// docs/python.md documents both).
//
// Errors keep the C++ message and map the code to a Python exception: INVALID_ARGUMENT and
// OUT_OF_RANGE -> ValueError, UNAVAILABLE, DEADLINE_EXCEEDED and CANCELLED -> ConnectionError
// (a server is gone or unreachable), ABORTED -> DroppedError (a RuntimeError: a SYNC barrier
// dropped this worker; call rejoin()), anything else (FAILED_PRECONDITION included) ->
// RuntimeError.
//
// Blocking and threading: connecting, start(), wait(), rejoin() and push()'s encoding run
// with the GIL released; a Client must be used from one thread at a time.
//
// Device arrays (DLPack kDLCUDA): every call that takes arrays takes `stream=` too, the
// caller's CUDA stream (python/tensor_arg.h); worker/client.h says what runs where.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "base/malloc_settings.h"
#include "base/proto_json.h"
#include "base/status_macros.h"
#include "glog/logging.h"
#include "job/config.h"
#include "job/job_layout.h"
#include "job/placement.h"
#include "python/tensor_arg.h"
#include "worker/client.h"
#include "worker/worker_events.h"

namespace tamp::python {
namespace {

namespace py = pybind11;

PyObject* dropped_error = nullptr;  // tamp._tamp.DroppedError, created at import.

[[noreturn]] void RaiseAs(PyObject* type, const absl::Status& status) {
  PyErr_SetString(type, std::string(status.message()).c_str());
  throw py::error_already_set();
}

[[noreturn]] void Raise(const absl::Status& status) {
  PyObject* type = PyExc_RuntimeError;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      type = PyExc_ValueError;
      break;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
      type = PyExc_ConnectionError;
      break;
    case absl::StatusCode::kAborted:
      type = dropped_error;
      break;
    default:
      break;
  }
  RaiseAs(type, status);
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Check(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

// A parsed, defaulted and validated run config.
struct Config {
  static Config FromText(const std::string& text, const std::string& source) {
    Config config;
    config.proto = Check(LoadConfigText(text, source, &config.notes));
    return config;
  }
  // A file that cannot be read raises OSError, FileNotFoundError where it does not exist, as
  // open() would. NOT_FOUND is not mapped so everywhere: a server's answer can carry it too.
  static Config FromFile(const std::string& path) {
    std::vector<std::string> notes;
    absl::StatusOr<config::RunConfig> config = LoadConfigFile(path, &notes);
    if (config.status().code() == absl::StatusCode::kNotFound) {
      std::error_code ignored;
      RaiseAs(std::filesystem::exists(path, ignored) ? PyExc_OSError : PyExc_FileNotFoundError,
              config.status());
    }
    return Config{Check(std::move(config)), std::move(notes)};
  }

  config::RunConfig proto;
  std::vector<std::string> notes;  // job/config_notes.h's, for tamp.Client to warn of.
};

// The process environment, with `overrides` standing in for some of its variables (the
// keyword arguments of tamp.init()).
EnvLookup EnvWith(std::map<std::string, std::string> overrides) {
  return [overrides = std::move(overrides),
          process = ProcessEnv()](const std::string& name) -> std::optional<std::string> {
    const auto found = overrides.find(name);
    return found != overrides.end() ? std::optional<std::string>(found->second) : process(name);
  };
}

// Placement errors are all the caller's environment or arguments: ValueError, whatever the
// code (a missing variable is FAILED_PRECONDITION in C++).
template <typename T>
T CheckPlacement(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(absl::InvalidArgumentError(value.status().message()));
  return *std::move(value);
}

// job/placement.h WorkerConfigPathFromEnv().
std::string ConfigPathFromEnv(std::map<std::string, std::string> overrides) {
  return CheckPlacement(WorkerConfigPathFromEnv(EnvWith(std::move(overrides))));
}

// job/placement.h WorkerRestartedFromEnv().
bool RestartedFromEnv() { return CheckPlacement(WorkerRestartedFromEnv(ProcessEnv())); }

// job/placement.h WorkerPlacementFromEnv(), as a dict.
py::dict PlacementFromEnv(const Config& config, std::map<std::string, std::string> overrides) {
  const Placement placement = CheckPlacement(
      WorkerPlacementFromEnv(config.proto.cluster(), EnvWith(std::move(overrides))));
  py::dict out;
  out["rank"] = placement.rank;
  out["local_rank"] = placement.local_rank;
  out["servers"] = placement.servers;
  out["source"] = placement.source;
  return out;
}

class PyClient {
 public:
  PyClient(const Config& config, uint32_t rank, std::vector<std::string> servers,
           const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
           uint64_t steps_per_epoch, uint64_t total_steps) {
    std::vector<TensorSpec> registered(tensors.size());
    for (size_t t = 0; t < tensors.size(); ++t) {
      registered[t].name = tensors[t].first;
      registered[t].shape = tensors[t].second;
    }
    // The job's layout: of these tensors (model.kind REGISTERED), or the config's model's,
    // which they must match.
    JobLayout layout = Check(BuildJobLayout(config.proto, std::move(registered)));
    layout_notes_ = LayoutNotes(config.proto, layout);
    for (const TensorSpec& spec : layout.tensors) {
      names_.push_back(spec.name);
      shapes_.push_back(spec.shape);
    }
    absl::StatusOr<std::unique_ptr<Client>> client;
    {
      py::gil_scoped_release release;
      client = Client::Connect(config.proto, std::move(layout), rank, std::move(servers),
                               RunLength{steps_per_epoch, total_steps});
    }
    client_ = Check(std::move(client));
    aggregates_ = client_->aggregates();
    rank_ = rank;
    steps_per_epoch_ = steps_per_epoch;
    total_steps_ = total_steps;
  }

  uint64_t Start(py::handle params, py::handle stream) {
    const std::shared_ptr<Client> live = Live("start");
    const TensorArgs args = Views(params, Access::kWrite, stream);
    absl::StatusOr<uint64_t> step;
    {
      py::gil_scoped_release release;
      step = live->Start(args.spans(), args.memory());
    }
    return Check(std::move(step));
  }

  uint64_t Resume(py::handle params, py::handle stream) {
    const std::shared_ptr<Client> live = Live("resume");
    const TensorArgs args = Views(params, Access::kWrite, stream);
    absl::StatusOr<uint64_t> step;
    {
      py::gil_scoped_release release;
      step = live->Resume(args.spans(), args.memory());
    }
    return Check(std::move(step));
  }

  // `step` as a signed int: pybind11 would answer a negative one for uint64_t with a
  // TypeError that prints every argument, the whole parameter list included.
  void BeginStep(int64_t step, py::handle params, py::handle stream) {
    if (step < 0) {
      Raise(absl::InvalidArgumentError(absl::StrCat("begin_step: step ", step, " is negative")));
    }
    const std::shared_ptr<Client> live = Live("begin_step");
    const TensorArgs args = Views(params, Access::kWrite, stream);
    absl::Status status;
    {
      py::gil_scoped_release release;  // A resync pulls the shards' weights.
      status = live->BeginStep(static_cast<uint64_t>(step), args.spans(), args.memory());
    }
    Check(status);
  }

  void Broadcast(py::handle params, py::handle stream) {
    const std::shared_ptr<Client> live = Live("broadcast");
    const TensorArgs args = Views(params, Access::kWrite, stream);
    absl::Status status;
    {
      py::gil_scoped_release release;  // Waits for worker 0's weights.
      status = live->Broadcast(args.spans(), args.memory());
    }
    Check(status);
  }

  // `tensor`: its name or its index in the layout. Dispatched here rather than by two
  // overloads: pybind11 would take True for index 1 and answer an index past int's range
  // with a TypeError that prints every argument, the gradient's values included.
  void Push(py::handle tensor, py::handle gradient, py::handle stream) {
    if (py::isinstance<py::str>(tensor)) {
      PushNamed(tensor.cast<std::string>(), gradient, stream);
      return;
    }
    // Any integer (numpy's too, through __index__), but not a bool.
    if (!PyIndex_Check(tensor.ptr()) || PyBool_Check(tensor.ptr())) {
      RaiseAs(PyExc_TypeError, absl::InvalidArgumentError(absl::StrCat(
                                   "Push(): the tensor must be its name (str) or its index "
                                   "(int), not ",
                                   Py_TYPE(tensor.ptr())->tp_name)));
    }
    const py::object as_int = py::reinterpret_steal<py::object>(PyNumber_Index(tensor.ptr()));
    if (!as_int) throw py::error_already_set();
    int overflow = 0;
    const long long index = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
    if (overflow != 0 || index < std::numeric_limits<int>::min() ||
        index > std::numeric_limits<int>::max()) {
      Raise(absl::InvalidArgumentError(absl::StrCat(
          "Push(): tensor index ", py::str(tensor).cast<std::string>(),
          " is out of range: the layout has ", names_.size(), " tensors")));
    }
    PushIndexed(static_cast<int>(index), gradient, stream);
  }

  void PushNamed(const std::string& name, py::handle gradient, py::handle stream) {
    const std::shared_ptr<Client> live = Live("push");
    const auto known = std::find(names_.begin(), names_.end(), name);
    const TensorArg arg = View(gradient, name, stream,
                               known == names_.end() ? -1 : known - names_.begin());
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = live->Push(name, arg.span(), arg.memory());
    }
    Check(status);
  }

  void PushIndexed(int tensor, py::handle gradient, py::handle stream) {
    const std::shared_ptr<Client> live = Live("push");
    const bool known = tensor >= 0 && static_cast<size_t>(tensor) < names_.size();
    const TensorArg arg = View(gradient, known ? names_[tensor] : absl::StrCat("#", tensor),
                               stream, known ? tensor : -1);
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = live->Push(tensor, arg.span(), arg.memory());
    }
    Check(status);
  }

  void Wait(py::handle out, py::handle stream) {
    const std::shared_ptr<Client> live = Live("wait");
    const TensorArgs args = Views(out, Access::kWrite, stream);
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = live->Wait(args.spans(), args.memory());
    }
    Check(status);
    completed_ = live->report();  // The next begin_step() clears the client's.
  }

  uint64_t Rejoin(py::handle params, const std::string& cause, py::handle stream) {
    const std::shared_ptr<Client> live = Live("rejoin");
    const TensorArgs args = Views(params, Access::kWrite, stream);
    absl::StatusOr<uint64_t> step;
    {
      py::gil_scoped_release release;
      step = live->Rejoin(args.spans(), cause, args.memory());
    }
    return Check(std::move(step));
  }

  py::dict Report() const {
    const std::shared_ptr<Client> live = Live("report");
    const StepReport& report = live->report();
    const StepTimeline::Figures& figures = report.timeline;
    py::dict out;
    out["shard_bytes_pushed"] = report.shard_bytes_pushed;
    out["shard_bytes_pulled"] = report.shard_bytes_pulled;
    out["raw_bytes_pushed"] = report.raw_bytes_pushed;
    out["compute_ms"] = figures.compute_ms;
    out["encode_ms"] = figures.encode_ms;
    out["wire_ms"] = figures.wire_ms;
    out["comm_ms"] = figures.comm_ms;
    out["hidden_ms"] = figures.hidden_ms;
    out["hidden_percent"] = figures.hidden_percent;
    out["decode_ms"] = report.decode_ms;
    out["apply_ms"] = report.apply_ms;
    return out;
  }

  // WorkerEvent JSON lines (worker/worker_events.h), as tamp_worker prints them.
  // `outside_ms`: the start of the client's step (from begin_step()) that the caller's
  // step_ms leaves out (its loop's clock starts later: after an evaluation, say). That time
  // fell in the step's first compute interval, so it comes off compute_ms.
  std::string StepEvent(uint64_t completed_steps, uint32_t epoch, std::optional<float> loss,
                        double step_ms, double thread_cpu_ms, double outside_ms) const {
    if (!(outside_ms >= 0) || std::isinf(outside_ms)) {
      Raise(absl::InvalidArgumentError(
          absl::StrCat("step_event: outside_ms must be finite and >= 0, got ", outside_ms)));
    }
    StepReport step = completed_;
    step.timeline.compute_ms = std::max(0.0, step.timeline.compute_ms - outside_ms);
    return ProtoToJson(::tamp::StepEvent({rank_, totals_or_last(), step}, completed_steps,
                                         total_steps_, epoch, loss, step_ms, thread_cpu_ms));
  }
  std::string EvalEvent(uint64_t completed_steps, uint32_t epoch, double accuracy) const {
    return ProtoToJson(::tamp::EvalEvent(Figures(), completed_steps, total_steps_, epoch, accuracy));
  }
  std::string DoneEvent(uint64_t completed_steps, std::optional<double> accuracy,
                        double step_ms_median) const {
    // The epoch of the last step, as its STEP event said (0 when none ran).
    const auto epoch = static_cast<uint32_t>(
        (completed_steps == 0 ? 0 : completed_steps - 1) / std::max<uint64_t>(steps_per_epoch_, 1));
    return ProtoToJson(::tamp::DoneEvent(Figures(), completed_steps, total_steps_, epoch,
                                         accuracy, step_ms_median));
  }

  py::dict Totals() const {
    const ClientTotals& totals = totals_or_last();
    py::dict out;
    out["bytes_pushed"] = totals.bytes_pushed;
    out["bytes_pulled"] = totals.bytes_pulled;
    out["raw_bytes_pushed"] = totals.raw_bytes_pushed;
    out["start_step"] = totals.start_step;
    out["steps_missed"] = totals.steps_missed;
    return out;
  }

  const std::vector<std::string>& names() const { return names_; }
  const std::vector<std::vector<int64_t>>& shapes() const { return shapes_; }
  const std::vector<std::string>& layout_notes() const {
    return layout_notes_;
  }
  bool aggregates() const { return aggregates_; }

  // Waits for the RPCs in flight, then closes the connections and stops the client's threads.
  // Once closed, every call but totals(), the events and the properties raises RuntimeError;
  // closing again does nothing.
  void Close() {
    if (client_ == nullptr) return;
    last_totals_ = client_->totals();
    std::shared_ptr<Client> closing = std::move(client_);
    py::gil_scoped_release release;
    closing.reset();
  }
  bool closed() const { return client_ == nullptr; }

 private:
  WorkerFigures Figures() const { return {rank_, totals_or_last(), completed_}; }
  // Shared with the call, so that close() from another thread (against the client's
  // one-thread rule) frees the client only once a call in flight has returned.
  std::shared_ptr<Client> Live(absl::string_view verb) const {
    if (client_ == nullptr) {
      Raise(absl::FailedPreconditionError(absl::StrCat(
          verb, ": this tamp.Client is closed (close() was called); create a new one")));
    }
    return client_;
  }
  const ClientTotals& totals_or_last() const {
    return client_ != nullptr ? client_->totals() : last_totals_;
  }
  TensorArgs Views(py::handle arrays, Access access, py::handle stream) const {
    return Check(TensorArgs::From(arrays.ptr(), names_, shapes_, access, Stream(stream)));
  }
  // `tensor`: the layout index whose shape the array must have; -1 for a name or index the
  // client refuses itself.
  TensorArg View(py::handle array, const std::string& name, py::handle stream,
                 int64_t tensor) const {
    TensorArg arg = Check(TensorArg::From(array.ptr(), name, Access::kRead, Stream(stream)));
    if (tensor >= 0) Check(arg.CheckShape(name, shapes_[tensor]));
    return arg;
  }
  // A call's `stream=`: None or 0 is the legacy default stream (DLPack's 1; 0 is that stream's
  // cudaStream_t, as torch.cuda.default_stream().cuda_stream says); else a cudaStream_t.
  static uintptr_t Stream(py::handle stream) {
    if (stream.is_none()) return 1;
    const long long value = py::cast<long long>(stream);
    if (value < 0) {
      Raise(absl::InvalidArgumentError(absl::StrCat("stream: ", value, " is not a CUDA stream")));
    }
    return value == 0 ? 1 : static_cast<uintptr_t>(value);
  }

  std::vector<std::string> names_;  // Layout order.
  std::vector<std::vector<int64_t>> shapes_;  // Layout order.
  std::vector<std::string> layout_notes_;  // job/job_layout.h's notes, to warn of.
  std::shared_ptr<Client> client_;  // Null once closed.
  ClientTotals last_totals_;        // The totals when close() was called.
  bool aggregates_ = false;
  uint32_t rank_ = 0;
  uint64_t steps_per_epoch_ = 1;
  uint64_t total_steps_ = 0;
  StepReport completed_;  // The last step wait() completed, for step_event().
};

PYBIND11_MODULE(_tamp, m) {
  m.doc() = "Tamp's worker client (see the tamp package and docs/python.md).";
  // As tamp_worker and tamp_server do: gRPC's locks are absl::Mutex, and Debian's Abseil
  // checks lock order on every lock (a graph update, a stack trace); the client's pushes
  // take dozens of them per tensor. Process-wide, but only absl::Mutex users see it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // glog, which Debian's torch shares (one libglog): to stderr, as the binaries log, and
  // initialised, so that neither the client's logging nor torch's begins with glog's
  // "Logging before InitGoogleLogging()" line. Left alone when the program did it already.
  if (!google::IsGoogleLoggingInitialized()) {
    FLAGS_logtostderr = true;
    google::InitGoogleLogging("tamp");
  }
  dropped_error = PyErr_NewExceptionWithDoc(
      "tamp._tamp.DroppedError",
      "A SYNC barrier dropped this worker (consistency.worker_timeout_ms): call rejoin().",
      PyExc_RuntimeError, nullptr);
  m.add_object("DroppedError", py::handle(dropped_error));

  py::class_<Config>(m, "Config")
      .def_static("from_file", &Config::FromFile, py::arg("path"))
      .def_static("from_text", &Config::FromText, py::arg("text"), py::arg("source") = "<text>")
      .def_property_readonly("num_workers",
                             [](const Config& c) { return c.proto.cluster().num_workers(); })
      .def_property_readonly("num_servers",
                             [](const Config& c) { return c.proto.cluster().num_servers(); })
      .def_property_readonly("notes", [](const Config& c) { return c.notes; })
      .def_property_readonly("epochs", [](const Config& c) { return c.proto.training().epochs(); })
      .def_property_readonly("max_steps",
                             [](const Config& c) { return c.proto.training().max_steps(); })
      .def_property_readonly("resync_steps",
                             [](const Config& c) { return c.proto.training().resync_steps(); })
      .def_property_readonly("batch_size",
                             [](const Config& c) { return c.proto.data().batch_size(); })
      .def_property_readonly("shuffle_seed",
                             [](const Config& c) { return c.proto.data().shuffle_seed(); })
      .def_property_readonly("train_limit",
                             [](const Config& c) { return c.proto.data().train_limit(); })
      .def_property_readonly("data_dir", [](const Config& c) { return c.proto.data().dir(); })
      .def_property_readonly("learning_rate",
                             [](const Config& c) { return c.proto.optimizer().learning_rate(); })
      .def_property_readonly("optimizer",
                             [](const Config& c) -> py::object {
                               // The servers' optimizer, as torch.optim names its settings;
                               // None where the config has none (server.mode AGGREGATE).
                               if (!c.proto.has_optimizer()) return py::none();
                               const config::Optimizer& o = c.proto.optimizer();
                               py::dict out;
                               out["name"] = o.name();
                               out["lr"] = o.learning_rate();
                               out["weight_decay"] = o.weight_decay();
                               if (o.name() == "adam") {
                                 out["betas"] = py::make_tuple(o.beta1(), o.beta2());
                                 out["eps"] = o.epsilon();
                               } else {
                                 out["momentum"] = o.momentum();
                                 out["nesterov"] = o.nesterov();
                               }
                               return std::move(out);
                             })
      .def_property_readonly("aggregates",
                             [](const Config& c) {
                               return c.proto.server().mode() == config::Server::AGGREGATE;
                             })
      .def_property_readonly("dgc_momentum",
                             [](const Config& c) {
                               return PushesWithDgcMomentum(c.proto.compression());
                             })
      .def_property_readonly("model_kind", [](const Config& c) {
        return config::Model::Kind_Name(c.proto.model().kind());
      });

  m.def("config_path_from_env", &ConfigPathFromEnv, py::arg("overrides"),
        "TAMP_CONFIG (job/placement.h WorkerConfigPathFromEnv); ValueError naming it.");
  m.def("restarted_from_env", &RestartedFromEnv,
        "TAMP_RESTART >= 1 (job/placement.h WorkerRestartedFromEnv); ValueError naming it.");
  m.def("placement_from_env", &PlacementFromEnv, py::arg("config"), py::arg("overrides"),
        "{rank, local_rank, servers, source} from tamp run's, torchrun's, Slurm's or "
        "Kubernetes' variables, `overrides` standing in for some (job/placement.h "
        "WorkerPlacementFromEnv); ValueError naming the variable.");
  m.def(
      "keep_freed_memory", [] { Check(KeepFreedMemory()); },
      "glibc's malloc keeps freed memory for reuse (base/malloc_settings.h KeepFreedMemory); "
      "RuntimeError when malloc refuses.");
  m.def(
      "total_steps",
      [](const Config& config, uint64_t steps_per_epoch) {
        return TotalSteps(config.proto.training(), steps_per_epoch);
      },
      py::arg("config"), py::arg("steps_per_epoch"),
      "Steps in the run, as the servers check them (job/config.h TotalSteps).");

  py::class_<PyClient>(m, "Client")
      .def(py::init<const Config&, uint32_t, std::vector<std::string>,
                    const std::vector<std::pair<std::string, std::vector<int64_t>>>&, uint64_t,
                    uint64_t>(),
           py::arg("config"), py::arg("rank"), py::arg("servers"), py::arg("tensors"),
           py::arg("steps_per_epoch"), py::arg("total_steps"))
      .def("start", &PyClient::Start, py::arg("params"), py::arg("stream") = py::none())
      .def("resume", &PyClient::Resume, py::arg("params"), py::arg("stream") = py::none())
      .def("broadcast", &PyClient::Broadcast, py::arg("params"), py::arg("stream") = py::none())
      .def("begin_step", &PyClient::BeginStep, py::arg("step"), py::arg("params"),
           py::arg("stream") = py::none())
      .def("push", &PyClient::Push, py::arg("tensor"), py::arg("gradient"),
           py::arg("stream") = py::none())
      .def("wait", &PyClient::Wait, py::arg("out"), py::arg("stream") = py::none())
      .def("rejoin", &PyClient::Rejoin, py::arg("params"), py::arg("cause") = "rejoin() called",
           py::arg("stream") = py::none())
      .def("close", &PyClient::Close)
      .def_property_readonly("closed", &PyClient::closed)
      .def("report", &PyClient::Report)
      .def("totals", &PyClient::Totals)
      .def("step_event", &PyClient::StepEvent, py::arg("completed_steps"), py::arg("epoch"),
           py::arg("loss"), py::arg("step_ms"), py::arg("thread_cpu_ms") = 0.0,
           py::arg("outside_ms") = 0.0)
      .def("eval_event", &PyClient::EvalEvent, py::arg("completed_steps"), py::arg("epoch"),
           py::arg("test_accuracy"))
      .def("done_event", &PyClient::DoneEvent, py::arg("completed_steps"),
           py::arg("test_accuracy"), py::arg("step_ms_median"))
      .def_property_readonly("tensor_names", &PyClient::names)
      .def_property_readonly("tensor_shapes", &PyClient::shapes)
      .def_property_readonly("layout_notes", &PyClient::layout_notes)
      .def_property_readonly("aggregates", &PyClient::aggregates);
}

}  // namespace
}  // namespace tamp::python
