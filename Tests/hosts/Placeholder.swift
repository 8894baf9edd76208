// placeholder until the host suite lands
