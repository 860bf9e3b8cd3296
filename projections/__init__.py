"""Pure projections: evolve a render state per event and render contexts under a token budget."""
