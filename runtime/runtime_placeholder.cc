// Placeholder translation unit until the runtime sources land.
