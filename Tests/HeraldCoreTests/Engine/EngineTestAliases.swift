// The engine tests' short name for an instant from RFC 3339 text (the calendar tests call it instantAt).
import HeraldCore

func at(_ text: String) -> Instant { instantAt(text) }
