-- Placeholder, replaced by the search driver.
return 0
