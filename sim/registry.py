"""The registry of sim's seams: mapping/registry.py's ``Registry`` (it lives there, the lowest
package, so that mapping's workload generators are a registry too without importing sim)."""

from mapping.registry import Registry as Registry
