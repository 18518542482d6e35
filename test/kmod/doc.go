// Package kmod tests the kubeblade-leds kernel module (kernel/kubeblade-leds)
// inside a QEMU guest on the rig's real 6.12 kernel (make hwtest): its KUnit
// suite, and the module with its simulated hardware driven by the agent's
// linux backend through sysfs, the frames the driver's ops table receives
// decoded the way the LEDs would read them, and a clean unload.
package kmod
