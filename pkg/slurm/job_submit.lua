-- finegrain's job_submit.lua for the Slurm of a virtual cluster (Slurm 22.05, JobSubmitPlugins=lua).
--
-- Slurm never starts a job on its own say: every new job is held (priority 0, squeue shows it
-- PENDING with reason JobHeldUser) until finegrain's delegation bridge has placed the job's
-- placeholder pods, set its node list to the nodes they were bound to and released it. Only the
-- bridge (running Slurm's commands as root in the slurmctld pod) may release a held job or
-- choose its nodes; anyone else gets an error that says why.
--
-- A job asks for its placement in its comment (sbatch --comment "finegrain.placement=most-loaded
-- finegrain.exclusive=false"); the script checks the words and copies them into the job's admin
-- comment, which only an administrator can change afterwards, where the bridge reads them.

local NO_VAL = 4294967294 -- a field the request leaves unset

local allowed = {
	placement = { ["least-loaded"] = true, ["most-loaded"] = true },
	exclusive = { ["true"] = true, ["false"] = true },
}

function slurm_job_submit(job_desc, part_list, submit_uid)
	job_desc.priority = 0
	local words = { "finegrain" }
	for key, value in string.gmatch(job_desc.comment or "", "finegrain%.([%w_-]+)=([^%s]*)") do
		if allowed[key] == nil then
			slurm.log_user("comment: finegrain.%s is not a finegrain option: use finegrain.placement=least-loaded|most-loaded and finegrain.exclusive=true|false", key)
			return slurm.ERROR
		end
		if not allowed[key][value] then
			slurm.log_user("comment: finegrain.%s=%s is not allowed: use finegrain.placement=least-loaded|most-loaded and finegrain.exclusive=true|false", key, value)
			return slurm.ERROR
		end
		table.insert(words, key .. "=" .. value)
	end
	job_desc.admin_comment = table.concat(words, " ")
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	if modify_uid == 0 then
		return slurm.SUCCESS
	end
	if job_rec.priority == 0 and job_desc.priority ~= nil and job_desc.priority ~= NO_VAL then
		slurm.log_user("finegrain places the jobs of this cluster: job %u starts once its placeholder pods are bound; it cannot be released by hand", job_rec.job_id)
		return slurm.ESLURM_ACCESS_DENIED
	end
	if job_desc.req_nodes ~= nil then
		slurm.log_user("finegrain chooses the nodes of the jobs of this cluster: job %u's node list cannot be set by hand", job_rec.job_id)
		return slurm.ESLURM_ACCESS_DENIED
	end
	return slurm.SUCCESS
end

return slurm.SUCCESS
