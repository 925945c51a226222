// The convergence table (bench/results/convergence.json) as the launcher reads it: what each
// measured compression cost in final test accuracy against no compression, on the reference
// jobs. Generated into convergence_table.cc by tools/tamp/make_convergence_table.py;
// //tools/tamp:convergence_table_current_test fails when the two disagree.
#ifndef TAMP_TOOLS_TAMP_CONVERGENCE_TABLE_H_
#define TAMP_TOOLS_TAMP_CONVERGENCE_TABLE_H_

#include <vector>

namespace tamp::launcher {

struct ConvergenceRow {
  const char* model;        // "mlp", "cnn", "cnn3".
  const char* row;          // "topk1_ef", ...
  const char* compression;  // config::ChunkCompression, text format.
  double final_accuracy;
  double none_accuracy;     // The same model's run without compression.
  // Run with the uncompressed run's optimizer. The others (DGC's, whose servers run no
  // momentum; the sign codecs' "recommended" rows) do not say what the codec loses at the
  // reference settings: auto does not judge by them, and names them when refusing.
  bool reference_optimizer;
};

// Every measured row; immutable, thread-safe.
const std::vector<ConvergenceRow>& ConvergenceRows();

}  // namespace tamp::launcher

#endif  // TAMP_TOOLS_TAMP_CONVERGENCE_TABLE_H_
