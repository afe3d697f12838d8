// Tests and benches reach the blocking wire client through this module.
@_exported import HeraldWireTesting
