"""Ground floor: protocol messages, domain types, errors and the clock. Imports nothing above."""
