/* Host helpers a GPU benchmark's driver uses (timing, comparing results, choosing the
 * device), in the style of suites such as PolyBench/GPU. Only host code calls them. */
#ifndef EXISTING_GPU_UTILS_H
#define EXISTING_GPU_UTILS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#define GPU_DEVICE 0
#define PERCENT_DIFF_ERROR_THRESHOLD 0.05

static double rtclock(void)
{
  struct timeval now;
  gettimeofday(&now, NULL);
  return now.tv_sec + now.tv_usec * 1.0e-6;
}

static float percent_diff(double a, double b)
{
  if (fabs(a) < 0.01 && fabs(b) < 0.01)
    return 0.0f;
  return 100.0f * fabs(fabs(a - b) / fabs(a + 1e-8));
}

#endif
