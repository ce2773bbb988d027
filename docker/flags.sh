# docker/flags.sh: sourced by the image scripts. The flags graders should run untrusted runners
# with (README, "Untrusted runners"): no network, no capabilities but the six the suite needs to run
# each runner as a uid of its own and clean up after it, and SYS_CHROOT to give each check a system
# root of its own (all seven are in Docker's default set), no privilege gain, bounded pids and memory.
hardened=(--network none --cap-drop ALL
    --cap-add CHOWN --cap-add DAC_OVERRIDE --cap-add FOWNER --cap-add KILL --cap-add SETUID --cap-add SETGID
    --cap-add SYS_CHROOT
    --security-opt no-new-privileges --pids-limit 512 --memory 1g)
