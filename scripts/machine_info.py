"""What the benchmark drivers print about the machine they ran on."""
import platform


def cpu_model():
    """The CPU's model name from /proc/cpuinfo, or the architecture where there is none."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()
