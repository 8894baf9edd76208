print("huddle-sim: not built yet")
