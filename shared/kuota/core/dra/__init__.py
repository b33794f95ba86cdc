"""DRA charging: the DeviceClass and ResourceSlice inventory, CEL selectors,
and what one pod charges."""
