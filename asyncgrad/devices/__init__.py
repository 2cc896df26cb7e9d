"""Devices and their settings (see ``device.py``)."""

from asyncgrad.devices.device import Device, cpu, device, set_inline_threshold, set_num_workers

__all__ = ["Device", "cpu", "device", "set_inline_threshold", "set_num_workers"]
