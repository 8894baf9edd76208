// placeholder until this module's first file lands; delete when adding one
