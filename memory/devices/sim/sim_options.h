// The sim device type's options: how many sim devices a registry (and so a Runtime) makes, and
// what each one is (memory/devices/sim/sim_device.h).
//
//   RuntimeOptions options;
//   options.sim.count = 2;         // sim:0 and sim:1
//   options.sim.guard = false;     // benchmarks: no guard pages, scopes are a counter
#ifndef FERRY_MEMORY_DEVICES_SIM_SIM_OPTIONS_H_
#define FERRY_MEMORY_DEVICES_SIM_SIM_OPTIONS_H_

#include <cstddef>

namespace ferry {

struct SimTypeOptions {
  // sim:0 .. sim:(count - 1); a negative count is 0.
  int count = 4;
  // Keep host code out of sim memory outside device scopes (SimDeviceOptions::guard).
  bool guard = true;
  // Each device's capacity in bytes (SimDeviceOptions::capacity_bytes); 0: as much as the host
  // has available.
  size_t bytes = 0;
};

}  // namespace ferry

#endif  // FERRY_MEMORY_DEVICES_SIM_SIM_OPTIONS_H_
