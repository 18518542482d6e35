package hwagent_test

// agentPath is where the agent binary is in the guest.
const agentPath = "/bin/kubeblade-agent"
