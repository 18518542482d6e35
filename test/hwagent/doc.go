// Package hwagent runs the shipped kubeblade-agent — the binary read out of
// the image's manifest for the guest's platform, as users pull it — as a
// process in the QEMU guests on the rig's real 6.12 kernel, once per
// scenario (make hwtest: x86_64; make hwtest-arm64: the CM4, CM5 and Radxa
// CM5 devicetrees): detection from the devicetree and from the GPIO chip
// label with /sys/firmware masked, its lines, button, PoE detect, the fan
// on the devicetree's pwm-gpio chip or hwmon, the LEDs through the
// kubeblade-leds module, its safe exit on SIGTERM, and what a SIGKILL
// leaves on the fan.
package hwagent
