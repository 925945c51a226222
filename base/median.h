// Medians of timing samples: step times, the phases of a step, calibration repetitions.
//
// Median() is the usual median: the middle value, or the mean of the two middle values for
// an even count. UpperMedian() takes the upper of the two instead, so it is always one of
// the samples; it orders only partially (O(n)). Both take `values` by value (they reorder
// their copy) and give 0 for no values. Pure functions, safe from any thread.
//
// Example:
//   Median({4, 1, 3, 2})       // 2.5
//   UpperMedian({4, 1, 3, 2})  // 3
#ifndef TAMP_BASE_MEDIAN_H_
#define TAMP_BASE_MEDIAN_H_

#include <vector>

namespace tamp {

// Median()
//
// The middle value of `values`, the mean of the middle two for an even count; 0 for none.
double Median(std::vector<double> values);

// UpperMedian()
//
// The middle value of `values`, the upper of the middle two for an even count; 0 for none.
double UpperMedian(std::vector<double> values);

}  // namespace tamp

#endif  // TAMP_BASE_MEDIAN_H_
