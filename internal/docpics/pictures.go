package docpics

const (
	cluster  = "#e8f0fb" // Kubernetes objects and controllers
	agentCol = "#e9f6e9" // the agent and the blade
	client   = "#fdf3e1" // people's tools
	hw       = "#f2f2f2"
)

// Components is the component diagram: the operator, one agent DaemonSet
// per BladeConfig, the agents and what they write, bladectl, the rack view
// and the certificate flow.
func Components() []byte {
	c := newCanvas(940, 590, "kubeblade's components")
	c.box(20, 30, 200, 60, cluster, "BladeConfig", "which Nodes, agent settings")
	c.box(300, 30, 260, 60, cluster, "kubeblade-operator", "Deployment, leader elected")
	c.box(660, 30, 260, 60, cluster, "CertificateSigningRequests", "certificates.k8s.io")
	c.arrow(220, 60, 300, 60, false, "watches")
	c.arrow(560, 60, 660, 60, false, "approves, signs")

	c.box(300, 160, 260, 60, cluster, "agent DaemonSet", "one per BladeConfig")
	c.arrow(430, 90, 430, 160, false, "creates, updates")

	c.box(300, 290, 260, 70, agentCol, "kubeblade-agent", "one pod per blade", "(or a systemd service, no cluster)")
	c.arrow(430, 220, 430, 290, false)
	c.note(424, 276, "end", "a pod per selected Node")
	c.arrow(540, 290, 720, 90, false, "requests its", "gRPC certificate")

	c.box(660, 270, 260, 100, cluster, "Kubernetes API", "Node: labels, condition, taint", "Node annotations: orders", "Blade objects, Events")
	c.arrow(560, 325, 660, 325, true, "status, Events;", "orders")

	c.box(300, 440, 260, 60, hw, "the blade", "fan unit, LEDs, button, sensors")
	c.arrow(430, 360, 430, 440, true, "kernel interfaces (registers", "on Raspberry Pi OS without", "an LED driver)")

	c.box(20, 290, 200, 70, client, "bladectl", "kubectl blade")
	c.arrow(220, 325, 300, 325, false)
	c.note(245, 380, "middle", "gRPC: unix socket or mutual TLS")
	c.path([][2]int{{120, 290}, {120, 250}, {790, 250}, {790, 270}}, false)
	c.note(660, 244, "middle", "cluster mode: annotations, get blades")

	c.box(20, 440, 200, 60, client, "rack view", "bladectl dashboard")
	c.path([][2]int{{120, 500}, {120, 550}, {860, 550}, {860, 370}}, false)
	c.note(600, 544, "middle", "watches Blades and Nodes, serves a page to the browser")
	return c.svg()
}

// Blade is a schematic of a pair of blades and their fan unit: the top
// LED, edge LED, edge button and the fan unit's connection, named.
func Blade() []byte {
	c := newCanvas(940, 420, "A Compute Blade pair and its fan unit (schematic)")
	c.note(20, 20, "start", "Schematic, not to scale: which part is where on the blade, and what reaches the fan unit. Pins: docs/hardware.md.")
	for i, side := range []string{"left blade", "right blade"} {
		y := 50 + i*170
		c.rect(40, y, 480, 130, agentCol, false)
		c.text(280, y+22, "middle", ` font-weight="bold"`, side)
		c.rect(200, y+40, 150, 60, hw, false)
		c.text(275, y+66, "middle", "", "CM4, CM5 or")
		c.text(275, y+82, "middle", "", "Radxa CM5")
		// The edge: LED and button.
		c.rect(40, y, 24, 130, "#d9d9d9", false)
		c.circle(52, y+40, 8, "#7fd37f")
		c.circle(52, y+92, 9, "#ffffff")
		c.circle(420, y+36, 8, "#7fb0f0")
		if i == 0 {
			c.note(72, y+44, "start", "edge LED")
			c.note(72, y+96, "start", "edge button (GPIO20)")
			c.note(432, y+40, "start", "top LED")
			c.note(360, y+112, "start", "LEDs: one chain on GPIO18,", "top first, then edge")
		}
		c.rect(500, y+50, 20, 30, "#d9d9d9", false)
		c.arrow(520, y+65, 640, 130+i*100, true)
	}
	c.note(20, 400, "start", "The edge (grey) carries the edge LED and the button; stealth is GPIO21, PoE+ detect GPIO23.")
	c.rect(640, 60, 280, 280, hw, false)
	c.text(780, 90, "middle", ` font-weight="bold"`, "fan unit")
	c.text(780, 108, "middle", "", "one for the pair")
	c.note(656, 150, "start",
		"standard: a 4-wire fan,",
		"  PWM on GPIO12, tach on GPIO13;",
		"  both blades want it: fan sync",
		"  (docs/cluster-aware.md)",
		"",
		"smart: a microcontroller on a UART",
		"  (GPIO12/13) to each blade: fan %,",
		"  RPM, airflow temperature; its LED",
		"  shows the edge LED's colour; its",
		"  button: 1 press left, 2 presses right")
	return c.svg()
}

// Modes is the agent's modes and what moves between them (internal/core).
func Modes() []byte {
	c := newCanvas(940, 520, "The agent's modes")
	c.box(370, 180, 200, 64, agentCol, "normal", "fan follows the curve", "edge LED: idle colour")

	c.box(30, 40, 220, 64, client, "identify", "edge LED blinks")
	c.arrow(370, 195, 250, 80, true)
	c.note(140, 125, "middle", "short press, bladectl identify,", "kubeblade.io/identify (toggles)")

	c.box(30, 330, 220, 64, hw, "stealth", "LEDs dark, GPIO21 set")
	c.arrow(370, 230, 250, 350, true)
	c.note(140, 300, "middle", "config, bladectl stealth,", "kubeblade.io/stealth")

	c.box(690, 40, 220, 64, "#fbe3e3", "critical", "fan 100 %, top LED blinks,", "stealth suspended")
	c.arrow(570, 190, 690, 60, false)
	c.note(600, 120, "end", "SoC ≥ criticalCelsius")
	c.arrow(690, 90, 570, 210, false)
	c.note(660, 150, "start", "SoC ≤ criticalCelsius − hysteresis")

	c.rect(620, 290, 300, 150, cluster, true)
	c.text(770, 310, "middle", ` font-weight="bold"`, "maintenance (the Node's)")
	c.note(636, 334, "start",
		"requested → queued → draining → drained",
		"(or draining → failed)",
		"edge LED: steady, blinking, safe-to-pull;",
		"failed: top LED blinks",
		"the operator cordons and drains; ends",
		"on a second long press or the annotation")
	c.arrow(570, 235, 640, 290, true)
	c.note(660, 262, "start", "long press ≥ 3 s, kubeblade.io/maintenance")

	c.note(30, 475, "start",
		"Identify, stealth and maintenance are independent and can hold at once; critical forces the fan and suspends stealth.",
		"Which LED shows what when several hold: internal/core (topLED, edgeLED) and docs/leds.md.")
	return c.svg()
}
