"""The device side: the emulated device (emulate), the C++ harness generator and the driver that
runs cases on a real device through it (run)."""
