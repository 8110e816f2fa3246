-- Argo CD health check of VirtualMachineMigration (migration.platform.example).
-- Argo CD runs it with the migration in obj and reads hs.status and hs.message;
-- manifests/argocd/kustomization.yaml puts it into argocd-cm as
-- resource.customizations.health.migration.platform.example_VirtualMachineMigration.
-- It reads what the controller writes (status.observedGeneration, status.phase,
-- the conditions) and uses only what Argo CD opens for a custom check (the base
-- and table libraries: no string library). docs/operators/gitops.md says what
-- each phase reads as, here and in kstatus (Flux, kpt).
--
--   Healthy      Succeeded
--   Degraded     Failed; RollingBack (it failed: the source is being restored);
--                Stalled (no progress for spec.policy.stallTimeout)
--   Suspended    a person must act: AwaitingApproval (spec.policy.approved),
--                Planned (spec.planOnly), held by spec.policy.paused
--   Progressing  every other phase, and a spec the controller has not seen yet

local function condition(status, kind)
  if status.conditions == nil then
    return nil
  end
  for _, c in ipairs(status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function isTrue(status, kind)
  local c = condition(status, kind)
  return c ~= nil and c.status == "True"
end

-- said is the message of the first of the conditions kinds that has one,
-- else fallback.
local function said(status, kinds, fallback)
  for _, kind in ipairs(kinds) do
    local c = condition(status, kind)
    if c ~= nil and c.message ~= nil and c.message ~= "" then
      return c.message
    end
  end
  return fallback
end

local function health(obj)
  local status = obj.status
  if status == nil or status.phase == nil or status.phase == "" then
    return "Progressing", "waiting for the controller to take the migration up"
  end
  local phase = status.phase
  local generation = obj.metadata.generation
  if generation ~= nil and status.observedGeneration ~= nil and status.observedGeneration ~= generation then
    return "Progressing", "waiting for the controller to observe generation " .. generation ..
      " (status is of generation " .. status.observedGeneration .. ")"
  end
  if phase == "Succeeded" then
    return "Healthy", said(status, {"Succeeded", "Ready"}, "the migration succeeded")
  end
  if phase == "Failed" then
    return "Degraded", said(status, {"Failed", "Ready"}, "the migration failed")
  end
  if phase == "RollingBack" then
    return "Degraded", "rolling back, the source VM is being restored: " .. said(status, {"Ready"}, "the migration failed")
  end
  if isTrue(status, "Stalled") then
    return "Degraded", said(status, {"Stalled"}, "no progress")
  end
  if isTrue(status, "Paused") then
    return "Suspended", said(status, {"Paused"}, "held by spec.policy.paused")
  end
  if phase == "AwaitingApproval" and isTrue(status, "ApprovalRequired") then
    return "Suspended", said(status, {"ApprovalRequired"}, "waiting for approval (spec.policy.approved)")
  end
  if phase == "Planned" then
    return "Suspended", said(status, {"Progressing", "Ready"}, "planned only: set spec.planOnly to false to migrate")
  end
  return "Progressing", said(status, {"Progressing", "Ready"}, phase)
end

local hs = {}
hs.status, hs.message = health(obj)
return hs
