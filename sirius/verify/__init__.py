"""Differential verification: original vs fused on the CPU executor, same seeded inputs."""
