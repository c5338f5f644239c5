#pragma once
// The two files `advisor validate` reads, read by the validation library's
// code the subcommand calls (advisor/validation/).
#include <string>

namespace fuzz {

// The job is the one the corpus' reports and records were made for:
// tests/validate's gpt-val on 4 ranks, batch 8, 3 steps, fp32, priced with
// the default machine profile; the records ran grid 2,1,1,2 xyzd, micro-batch
// 1, no recompute, no overlap.

// A run's record as validate reads it once the engine exited 0, then the
// repeat summarized as the report holds it. Returns false when the record is
// refused (ff::InputError); a finding aborts.
bool read_run_record(const std::string& path);

// `validate --resume` on the report at `path`, up to where it would start
// running the engine: the report checked against the job, its finished
// repeats kept and summarized, the scores, the placement, the plot and the
// table it prints. Returns false when the report is refused (ff::InputError).
bool resume_report(const std::string& path);

}  // namespace fuzz
